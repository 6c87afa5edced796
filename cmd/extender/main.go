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
	"github.com/gpushare/gpushare/pkg/scheduler/preempt"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
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
		"clientCertRequired", cfg.tls.ClientCAFile != "", "policy", cfg.policy, "draMode", cfg.draMode,
		"resource", cfg.names.Resource, "unit", cfg.names.Unit.String(), "qps", cfg.qps, "burst", cfg.burst)
	if os.Getenv("GOGC") == "" {
		gc := &gctarget.Target{Percent: cfg.gcPercent, MinHeadroom: uint64(cfg.gcMinHeadroom.Value())} //nolint:gosec // G115: validated non-negative
		gc.Start()
		defer gc.Stop()
	}
	rc, client, err := apiClient(cfg)
	if err != nil {
		return err
	}
	policy, _ := policies.New(cfg.policy) // validated
	c := cache.New(cfg.names, logger.WithName("cache"))
	factory := informers.NewSharedInformerFactory(client, 0)
	nodesSynced, err := feed.AddNodeEventHandlers(c, factory, cfg.names)
	if err != nil {
		return fmt.Errorf("informers: %w", err)
	}
	draSynced, draOpts, err := draMode(cfg, c, factory, logger)
	if err != nil {
		return err
	}
	pods := feed.NewPodFeed(c, cfg.names)
	ln, err := listen(cfg, logger)
	if err != nil {
		return err
	}
	informerCtx, stopInformers := context.WithCancel(context.WithoutCancel(ctx))
	defer func() { stopInformers(); factory.Shutdown() }()
	factory.Start(informerCtx.Done())
	go pods.Run(informerCtx, pods.ListWatch(client))
	opts := []scheduler.Option{scheduler.WithNodeLister(factory.Core().V1().Nodes().Lister()),
		scheduler.WithPodLister(pods.Lister()), scheduler.WithFilterChoosing(cfg.filterChooses), scheduler.WithPreemption(cfg.preemption)}
	holdKey, err := holdKeyOption(cfg, logger)
	if err != nil {
		return err
	}
	opts = append(opts, holdKey...)
	opts = append(opts, draOpts...)
	if cfg.bindEvents {
		eventOpts, stopEvents, err := eventOptions(ctx, informerCtx, cfg, rc)
		if err != nil {
			return err
		}
		defer stopEvents()
		opts = append(opts, eventOpts...)
	}
	hcfg := scheduler.HandlerConfig{MaxBody: cfg.maxBody, RequireClientCert: cfg.tls.ClientCAFile != ""}
	if cfg.leaderElect {
		elector, stopElection, err := elect(ctx, cfg, rc, &hcfg)
		if err != nil {
			return err
		}
		defer stopElection() // after the settling below: the lease goes last
		opts = append(opts, scheduler.WithLeadership(elector))
	}
	ext := scheduler.NewExtender(c, client, policy, cfg.names, opts...)
	var warm atomic.Bool
	go warmUp(informerCtx, ext, &warm, append([]toolscache.InformerSynced{nodesSynced, pods.HasSynced}, draSynced...)...)
	if cfg.profilingAddress != "" {
		go serveProfiling(ctx, cfg.profilingAddress)
	}
	routes, err := withDRAWebhook(cfg, client, scheduler.NewHandler(ext, warm.Load, hcfg, logger), logger)
	if err != nil {
		return err
	}
	err = server.Serve(ctx, ln, routes)
	settleCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleOnExit)
	defer cancel()
	ext.WaitSettled(settleCtx) // binds of unknown outcome still being settled
	return err
}

// apiClient builds the extender's client of the API server from cfg's kubeconfig and limits.
func apiClient(cfg *config) (*rest.Config, kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags(cfg.master, cfg.kubeconfig)
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst, rc.UserAgent = float32(cfg.qps), cfg.burst, "gpushare-extender/"+version.Version
	rc.ContentType, rc.AcceptContentTypes = protobuf, protobuf+",application/json" // cheaper than JSON on both ends
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, nil, fmt.Errorf("client: %w", err)
	}
	return rc, client, nil
}

// eventOptions records the extender's events. They go through a client of their own: sharing
// the binds' rate limiter, one event per bind halved the binds the extender could make per
// second. The extender drops the events over --event-qps before they reach the broadcaster
// (WithEventRate), so this client's own limit is only a backstop. stop shuts the broadcaster.
func eventOptions(ctx, informerCtx context.Context, cfg *config, rc *rest.Config) (opts []scheduler.Option, stop func(), err error) {
	erc := rest.CopyConfig(rc)
	erc.QPS, erc.Burst = float32(2*cfg.eventQPS), max(2, int(4*cfg.eventQPS))
	eventClient, err := kubernetes.NewForConfig(erc)
	if err != nil {
		return nil, nil, fmt.Errorf("events client: %w", err)
	}
	broadcaster := events.NewEventBroadcasterAdapterWithContext(ctx, eventClient)
	broadcaster.StartRecordingToSink(informerCtx.Done())
	return []scheduler.Option{scheduler.WithEventRecorder(broadcaster.NewRecorder("gpushare-extender")),
		scheduler.WithEventRate(float32(cfg.eventQPS), max(1, int(2*cfg.eventQPS)))}, broadcaster.Shutdown, nil
}

// holdKeyOption reads --hold-key-file; without it the extender signs the preemption holds with
// a key of its own process, which it says.
func holdKeyOption(cfg *config, logger klog.Logger) ([]scheduler.Option, error) {
	if cfg.holdKeyFile == "" {
		if cfg.preemption {
			logger.Info("Warning: no --hold-key-file: preemption holds are signed with a random key of this process; " +
				"a restarted extender or a new leader ignores them (their preemptors compete again)")
		}
		return nil, nil
	}
	key, err := preempt.LoadHoldKey(cfg.holdKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--hold-key-file: %w", err)
	}
	return []scheduler.Option{scheduler.WithHoldKey(key)}, nil
}

// serveProfiling serves pprof on addr (--profiling-address) until ctx ends.
func serveProfiling(ctx context.Context, addr string) {
	if err := server.ServeProfiling(ctx, addr); err != nil {
		klog.FromContext(ctx).Error(err, "Profiling server stopped")
	}
}

// warmUp makes the extender ready once the first lists are in the cache, their garbage is back
// to the OS and a learning policy has learned from the running pods (answers before that would
// place without them), then keeps the policy's per-node state current until ctx ends.
func warmUp(ctx context.Context, ext *scheduler.Extender, warm *atomic.Bool, synced ...toolscache.InformerSynced) {
	if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	debug.FreeOSMemory() // the first lists' decoded objects, garbage now, back to the OS
	ext.Relearn()
	ext.SyncPolicy()
	if err := ext.RebuildHolds(klog.FromContext(ctx)); err != nil {
		klog.FromContext(ctx).Error(err, "Preemption holds not rebuilt")
	}
	warm.Store(true)
	ext.RunPolicySync(ctx, policySyncPeriod)
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
