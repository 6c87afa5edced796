// Command extender is gpushare's kube-scheduler extender: it tracks every GPU's memory, answers
// filter, prioritize, bind and preempt, and writes the chosen GPU on the pod before binding it.
package main

import (
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime/debug"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/gctarget"
	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/cache/feed"
	"github.com/gpushare/gpushare/pkg/placement/policies"
	"github.com/gpushare/gpushare/pkg/scheduler"
	"github.com/gpushare/gpushare/pkg/version"
)

func main() {
	klog.InitFlags(nil)
	policies := policies.NewRegistry()
	cfg := defaultConfig()
	cfg.addFlags(flag.CommandLine, policies)
	flag.Parse()
	if err := cfg.validate(policies); err != nil {
		fmt.Fprintln(os.Stderr, "extender:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, &cfg, policies)
	stop()
	if err != nil {
		klog.Background().Error(err, "Extender failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
}

// policySyncPeriod is how often a policy with per-node state is told the current nodes (it
// forgets deleted ones).
const policySyncPeriod = time.Minute

func run(ctx context.Context, cfg *config, policies policies.Registry) error {
	logger := klog.FromContext(ctx)
	logger.Info("Starting gpushare extender", "version", version.Version, "commit", version.Commit, "address", cfg.listenAddress(), "https", !cfg.plainHTTP,
		"clientCertRequired", cfg.tls.ClientCAFile != "", "policy", cfg.policy,
		"resource", cfg.names.Resource, "unit", cfg.names.Unit.String(), "qps", cfg.qps, "burst", cfg.burst)
	if os.Getenv("GOGC") == "" {
		gc := &gctarget.Target{Percent: cfg.gcPercent, MinHeadroom: uint64(cfg.gcMinHeadroom.Value())} //nolint:gosec // G115: validated non-negative
		gc.Start()
		defer gc.Stop()
	}
	rc, err := clientcmd.BuildConfigFromFlags(cfg.master, cfg.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst, rc.UserAgent = float32(cfg.qps), cfg.burst, "gpushare-extender/"+version.Version
	rc.ContentType, rc.AcceptContentTypes = protobuf, protobuf+",application/json" // cheaper than JSON on both ends
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	policy, _ := policies.New(cfg.policy) // validated
	c := cache.New(cfg.names, logger.WithName("cache"))
	factory := informers.NewSharedInformerFactory(client, 0)
	nodesSynced, err := feed.AddNodeEventHandlers(c, factory, cfg.names)
	if err != nil {
		return fmt.Errorf("informers: %w", err)
	}
	pods := feed.NewPodFeed(c, cfg.names)
	synced := []toolscache.InformerSynced{nodesSynced, pods.HasSynced}
	ln, err := listen(cfg, logger)
	if err != nil {
		return err
	}
	informerCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	defer func() { stopInformers(); factory.Shutdown() }()
	factory.Start(informerCtx.Done())
	go pods.Run(informerCtx, pods.ListWatch(client))
	// Ready once the first lists are in the cache, their garbage is back to the OS and a
	// learning policy has learned from the running pods: answers before that would place
	// without them.
	var warm atomic.Bool
	ready := warm.Load
	opts := []scheduler.Option{scheduler.WithNodeLister(factory.Core().V1().Nodes().Lister()),
		scheduler.WithPodLister(pods.Lister()), scheduler.WithFilterChoosing(cfg.filterChooses), scheduler.WithPreemption(cfg.preemption)}
	if cfg.bindEvents {
		// Events go through a client of their own: sharing the binds' rate limiter, one event
		// per bind halved the binds the extender could make per second. The extender drops
		// the events over --event-qps before they reach the broadcaster (WithEventRate), so
		// this client's own limit is only a backstop.
		erc := rest.CopyConfig(rc)
		erc.QPS, erc.Burst = float32(2*cfg.eventQPS), max(2, int(4*cfg.eventQPS))
		eventClient, err := kubernetes.NewForConfig(erc)
		if err != nil {
			return fmt.Errorf("events client: %w", err)
		}
		broadcaster := events.NewEventBroadcasterAdapterWithContext(ctx, eventClient)
		broadcaster.StartRecordingToSink(informerCtx.Done())
		defer broadcaster.Shutdown()
		opts = append(opts, scheduler.WithEventRecorder(broadcaster.NewRecorder("gpushare-extender")),
			scheduler.WithEventRate(float32(cfg.eventQPS), max(1, int(2*cfg.eventQPS))))
	}
	hcfg := scheduler.HandlerConfig{MaxBody: cfg.maxBody, RequireClientCert: cfg.tls.ClientCAFile != ""}
	if cfg.leaderElect {
		ecfg := cfg.election
		forward, err := forwarding(cfg, &ecfg, logger)
		if err != nil {
			return err
		}
		elector, stopElection, err := startElection(ctx, rc, ecfg)
		if err != nil {
			return err
		}
		defer stopElection() // after the settling below: the lease goes last
		opts = append(opts, scheduler.WithLeadership(elector))
		if forward != nil {
			forward.Leader = elector.LeaderAddress
			hcfg.Forward = forward
		}
	}
	ext := scheduler.NewExtender(c, client, policy, cfg.names, opts...)
	go func() { // a learning policy starts from the pods already running
		if toolscache.WaitForCacheSync(informerCtx.Done(), synced...) {
			debug.FreeOSMemory() // the first lists' decoded objects, garbage now, back to the OS
			ext.Relearn()
			ext.SyncPolicy()
			if err := ext.RebuildHolds(); err != nil {
				logger.Error(err, "Preemption holds not rebuilt")
			}
			warm.Store(true)
			ext.RunPolicySync(informerCtx, policySyncPeriod)
		}
	}()
	if cfg.profilingAddress != "" {
		go func() {
			if err := scheduler.ServeProfiling(ctx, cfg.profilingAddress); err != nil {
				logger.Error(err, "Profiling server stopped")
			}
		}()
	}
	err = scheduler.Serve(ctx, ln, scheduler.NewHandler(ext, ready, hcfg, logger))
	settleCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleOnExit)
	defer cancel()
	ext.WaitSettled(settleCtx) // binds of unknown outcome still being settled
	return err
}

// listen opens the extender's port: HTTPS with cfg's files, or plain HTTP when asked for.
func listen(cfg *config, logger klog.Logger) (net.Listener, error) {
	var tlsCfg *tls.Config
	if !cfg.plainHTTP {
		var err error
		if tlsCfg, err = cfg.tls.ServerConfig(logger.WithName("tls")); err != nil {
			return nil, fmt.Errorf("TLS: %w", err)
		}
		if cfg.tls.ClientCAFile == "" {
			logger.Info("Warning: no --client-ca-file: any client that reaches the port can call bind")
		}
	}
	ln, err := net.Listen("tcp", cfg.listenAddress())
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	return ln, nil
}

// protobuf is the API server's protobuf media type: watching and decoding pods costs both ends
// less CPU than JSON.
const protobuf = "application/vnd.kubernetes.protobuf"

// settleOnExit is how long a stopping extender waits for binds of unknown outcome to settle.
const settleOnExit = 10 * time.Second
