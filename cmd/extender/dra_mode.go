package main

import (
	"fmt"

	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/cache/feed"
	"github.com/gpushare/gpushare/pkg/scheduler"
)

// draMode wires --dra-mode: the ResourceSlice and ResourceClaim informers feed c (before
// factory starts), and the extender places for kube-scheduler's allocator and offers no bind.
// Without --dra-mode it adds nothing.
func draMode(cfg *config, c cache.Cache, factory informers.SharedInformerFactory, logger klog.Logger) ([]toolscache.InformerSynced, []scheduler.Option, error) {
	if !cfg.draMode {
		return nil, nil, nil
	}
	f := feed.NewDRAFeed(c, cfg.draDriver, cfg.names, klog.LoggerWithName(logger, "dra-feed"))
	synced, err := feed.AddDRAEventHandlers(f, factory)
	if err != nil {
		return nil, nil, fmt.Errorf("--dra-mode informers: %w", err)
	}
	logger.Info("DRA mode: cards from ResourceSlices, charges from ResourceClaims; serving filter and prioritize only (kube-scheduler binds)",
		"driver", cfg.draDriver, "gpuPreemption", false)
	return synced, []scheduler.Option{scheduler.WithDRA(cfg.draDriver)}, nil
}
