package main

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/scheduler"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

// releaseTimeout bounds how long a stopping leader waits to release its Lease.
const releaseTimeout = 5 * time.Second

// startElection runs leader election with a client of its own (binds cannot starve its
// renewals). stop ends it: a leader releases the Lease, so that another replica takes over
// at once.
func startElection(ctx context.Context, rc *rest.Config, cfg server.ElectionConfig) (*server.Elector, func(), error) {
	erc := rest.CopyConfig(rc)
	erc.QPS, erc.Burst = 5, 10
	client, err := kubernetes.NewForConfig(erc)
	if err != nil {
		return nil, nil, fmt.Errorf("leader election client: %w", err)
	}
	elector, err := server.NewElector(client, cfg)
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

// forwarding sets up how this replica forwards the verbs to the leader while it follows, and
// the address ecfg advertises for the others to forward to it: nil (and no address) when
// --forward-to-leader is off, when it serves plain HTTP (a sidecar of kube-scheduler, reached
// on loopback) or without --client-ca-file (the replicas could not authenticate each other),
// or when no address is known; followers then refuse binds and kube-scheduler retries them.
func forwarding(cfg *config, ecfg *server.ElectionConfig, logger klog.Logger) (*server.ForwardConfig, error) {
	ecfg.Address = ""
	switch {
	case !cfg.forward:
		return nil, nil
	case cfg.plainHTTP || cfg.tls.ClientCAFile == "":
		logger.Info("Warning: followers do not forward to the leader without HTTPS and --client-ca-file; they refuse binds, kube-scheduler retries them")
		return nil, nil
	}
	addr := cfg.advertiseAddress()
	if addr == "" {
		logger.Info("Warning: no address to advertise (--leader-elect-advertise-address, or $POD_IP): followers cannot forward to this replica while it leads")
	}
	transport, err := cfg.tls.PeerTransport(logger.WithName("forward"))
	if err != nil {
		return nil, fmt.Errorf("forwarding to the leader: %w", err)
	}
	ecfg.Address = addr
	logger.Info("Followers forward the verbs to the leader", "advertise", addr)
	return &server.ForwardConfig{Transport: transport, Self: ecfg.Identity}, nil
}

// elect starts the leader election and, unless forwarding is off, sets hcfg to forward a
// follower's verbs to the leader.
func elect(ctx context.Context, cfg *config, rc *rest.Config, hcfg *scheduler.HandlerConfig) (*server.Elector, func(), error) {
	ecfg := cfg.election
	forward, err := forwarding(cfg, &ecfg, klog.FromContext(ctx))
	if err != nil {
		return nil, nil, err
	}
	elector, stop, err := startElection(ctx, rc, ecfg)
	if err != nil {
		return nil, nil, err
	}
	if forward != nil {
		forward.Leader = elector.LeaderAddress
		hcfg.Forward = forward
	}
	return elector, stop, nil
}
