package deviceplugin

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/enforce"
)

// Registration retries: the first after registerRetryMin, doubling up to registerRetryMax, so
// that a kubelet whose socket exists before it accepts connections (it binds, then listens) is
// registered with no later than registerRetryMax after it listens.
const (
	registerRetryMin = 100 * time.Millisecond
	registerRetryMax = time.Second
)

// Plugin is the gpushare device plugin. Build it with New and start it with Run; its gRPC
// methods may also be called directly (tests, benchmarks).
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer

	cfg        config
	nv         nvml.Interface
	client     kubernetes.Interface
	inv        *inventory
	tracker    *tracker // the admission ledger; it owns its lock
	reconciler *reconciler
	backend    enforce.Backend // holds containers to their ask (--memory-limit)
}

var _ pluginapi.DevicePluginServer = (*Plugin)(nil)

// New builds a plugin over an initialized NVML library and an API client. It reads the GPUs
// now and refuses a unit that would overflow kubelet's message limit.
func New(nv nvml.Interface, client kubernetes.Interface, opts ...Option) (*Plugin, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		o(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	inv, err := newInventory(nv, &cfg.names, uint64(cfg.reserveMemory)) //nolint:gosec // G115: validate refuses a negative reserve
	if err != nil {
		return nil, err
	}
	inv.logSizes(cfg.logger, cfg.reserveMemory)
	inv.readTopology(cfg.logger, nv, cfg.sysfsRoot)
	if cfg.pods == nil {
		cfg.pods = NewInformerPodSource(client, cfg.nodeName)
	}
	backend := newBackend(klog.NewContext(context.Background(), cfg.logger), &cfg)
	return &Plugin{cfg: cfg, nv: nv, client: client, inv: inv, tracker: &tracker{}, reconciler: newReconciler(), backend: backend}, nil
}

// MemoryLimit is how containers admitted now are held to their ask: MemoryLimitHAMiCore,
// MemoryLimitNone, or contract.MemoryLimitUnavailable (HAMi-core was asked for and could not be
// prepared; reason says why).
func (p *Plugin) MemoryLimit() (mode, reason string) { return p.backend.Mode() }

// baseCtx gives a gRPC handler's ctx the plugin's logger.
func (p *Plugin) baseCtx(ctx context.Context) context.Context {
	return klog.NewContext(ctx, p.cfg.logger)
}

// Run starts the pod source, the reconciler and the health watch, serves the plugin socket and
// registers with kubelet, again whenever kubelet restarts, until ctx ends.
func (p *Plugin) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("node", p.cfg.nodeName)
	ctx = klog.NewContext(ctx, logger)
	if r, ok := p.cfg.pods.(Runner); ok {
		logger.Info("Waiting for the pod source to sync")
		if err := r.Run(ctx); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while waiting for the API server
			}
			return fmt.Errorf("start pod source: %w", err)
		}
	}
	go p.runReconciler(ctx)
	if p.cfg.health {
		go p.watchHealth(ctx)
	}
	if err := p.waitForKubeletDir(ctx); err != nil {
		return nil // stopped while waiting for kubelet
	}
	restart := make(chan string, 1)
	if err := p.watchKubeletDir(ctx, restart); err != nil {
		return err
	}
	for {
		srv, err := p.serve(ctx)
		if err != nil {
			return err
		}
		why := p.registerUntil(ctx, restart)
		srv.Stop()
		if ctx.Err() != nil {
			logger.Info("Device plugin stopped")
			return nil
		}
		logger.Info("Serving and registering again", "reason", why)
	}
}

// registerUntil registers (retrying) and then waits; it returns the reason to restart, or ""
// when ctx ended.
func (p *Plugin) registerUntil(ctx context.Context, restart <-chan string) string {
	logger := klog.FromContext(ctx)
	wait := registerRetryMin
	for failures := 0; ; {
		err := p.register(ctx)
		var retry <-chan time.Time
		switch err {
		case nil:
			logger.Info("Registered with kubelet", "resource", p.cfg.names.Resource, "socket", p.SocketPath())
			failures, wait = 0, registerRetryMin
		default:
			if failures%20 == 0 { // not every 100 ms to 1 s
				logger.Error(err, "Registration failed; retrying", "retryAfter", wait, "failures", failures+1)
			}
			failures++
			retry = time.After(wait)
			wait = min(2*wait, registerRetryMax)
		}
		select {
		case <-ctx.Done():
			return ""
		case why := <-restart:
			return why
		case <-retry:
		}
	}
}
