package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/scheduler"
)

// releaseTimeout bounds how long a stopping leader waits to release its Lease.
const releaseTimeout = 5 * time.Second

// startElection runs leader election with a client of its own (binds cannot starve its
// renewals). stop ends it: a leader releases the Lease, so that another replica takes over
// at once.
func startElection(ctx context.Context, rc *rest.Config, cfg scheduler.ElectionConfig) (*scheduler.Elector, func(), error) {
	erc := rest.CopyConfig(rc)
	erc.QPS, erc.Burst = 5, 10
	client, err := kubernetes.NewForConfig(erc)
	if err != nil {
		return nil, nil, fmt.Errorf("leader election client: %w", err)
	}
	elector, err := scheduler.NewElector(client, cfg)
	if err != nil {
		return nil, nil, err
	}
	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := elector.Run(ectx); err != nil {
			klog.FromContext(ctx).Error(err, "Leader election stopped")
		}
	}()
	stop := func() {
		cancel()
		select {
		case <-done:
		case <-time.After(releaseTimeout):
		}
	}
	return elector, stop, nil
}
