package dra

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/enforce"
)

// Publisher publishes the driver's ResourceSlices; kubeletplugin.Helper is one.
type Publisher interface {
	// PublishResources replaces what is published with resources; it does not block on the
	// API server.
	PublishResources(ctx context.Context, resources resourceslice.DriverResources) error
}

var (
	_ kubeletplugin.DRAPlugin = (*Driver)(nil)
	_ Publisher               = (*kubeletplugin.Helper)(nil)
)

// Driver is share-plugin's DRA kubelet plugin. Build it with New and start it with Run; its
// kubeletplugin.DRAPlugin methods may also be called directly (tests).
//
// Locks, always taken in this order: pubMu, then mu, then the cards' own.
type Driver struct {
	cfg     Config
	nv      nvml.Interface
	client  kubernetes.Interface
	cards   *cards
	backend enforce.Backend
	order   DeviceOrder

	// mu guards prepared. It is held over a whole prepare or unprepare, whose enforcement
	// files it removes for every claim not in prepared (enforce.Backend.Collect).
	mu       sync.Mutex
	prepared map[types.UID]record

	// pubMu guards publisher and serialises publish, so that each publication is of the state
	// at its time and the last one wins. publisher is nil until Run starts the kubelet plugin:
	// nothing is published before.
	pubMu     sync.Mutex
	publisher Publisher

	// fatal stops Run with a cause (HandleError); set by Run before anything can call it.
	fatal context.CancelCauseFunc
}

// Option changes what New builds.
type Option func(*options)

type options struct {
	mounter enforce.Mounter
}

// WithMounter replaces the tmpfs mounts of the HAMi-core counter folders (tests that cannot
// mount). Default: real tmpfs mounts.
func WithMounter(m enforce.Mounter) Option { return func(o *options) { o.mounter = m } }

// New builds the driver over an initialized NVML library and an API client: it reads and sizes
// the cards, prepares the enforcement backend and reads back the claims it prepared before
// (their CDI specs). The backend removes the files of a claim as soon as it is unprepared,
// whatever cfg.Enforce.CollectAfter says: that delay covers device-plugin mode's pod informer
// lagging its Allocate, and here the claims prepared are the driver's own record, never late.
func New(ctx context.Context, nv nvml.Interface, client kubernetes.Interface, cfg Config, opts ...Option) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	logger := klog.FromContext(ctx)
	cs, err := readCards(logger, nv, &cfg)
	if err != nil {
		return nil, err
	}
	cfg.Enforce.CollectAfter = 0
	var eopts []enforce.Option
	if o.mounter != nil {
		eopts = append(eopts, enforce.WithMounter(o.mounter))
	}
	d := &Driver{cfg: cfg, nv: nv, client: client, cards: cs, backend: enforce.NewBackend(ctx, cfg.Enforce, eopts...),
		order: orders()[cfg.DeviceOrder]}
	if d.prepared, err = d.readSpecs(logger); err != nil {
		return nil, err
	}
	mode, _ := d.backend.Mode()
	logger.Info("DRA driver ready", "driver", cfg.DriverName, "node", cfg.NodeName, "devices", len(cs.list), "unit", cfg.Names.Unit.String(),
		"deviceOrder", cfg.DeviceOrder, "memoryLimit", mode, "cdiRoot", cfg.CDIRoot, "pluginDir", cfg.pluginDir(), "registryDir", cfg.RegistryDir,
		"healthCheck", cfg.HealthCheck, "preparedClaims", len(d.prepared))
	return d, nil
}

// MemoryLimit is how claims prepared now are held to what they consumed (enforce.Backend.Mode).
func (d *Driver) MemoryLimit() (mode, reason string) { return d.backend.Mode() }

// Run registers the driver with kubelet, publishes the node's pool and, when configured,
// watches the cards' health, until ctx ends (nil) or a fatal error (HandleError) stops it.
func (d *Driver) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx).WithValues("driver", d.cfg.DriverName, "node", d.cfg.NodeName)
	ctx, cancel := context.WithCancelCause(klog.NewContext(ctx, logger))
	defer cancel(nil)
	d.fatal = cancel
	for _, dir := range []string{d.cfg.pluginDir(), d.cfg.RegistryDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return fmt.Errorf("kubelet plugin folder: %w", err)
		}
	}
	d.mu.Lock()
	d.collectLocked(ctx) // what a crash left between a prepare's files and its spec
	d.mu.Unlock()
	helper, err := kubeletplugin.Start(ctx, d, kubeletplugin.DriverName(d.cfg.DriverName), kubeletplugin.NodeName(d.cfg.NodeName),
		kubeletplugin.KubeClient(d.client), kubeletplugin.RegistrarDirectoryPath(d.cfg.RegistryDir),
		kubeletplugin.PluginDataDirectoryPath(d.cfg.pluginDir()))
	if err != nil {
		return fmt.Errorf("start the DRA kubelet plugin: %w", err)
	}
	defer helper.Stop()
	d.setPublisher(helper)
	if err := d.publish(ctx); err != nil {
		return err
	}
	logger.Info("DRA driver registered and publishing", "cdiKind", d.cfg.cdiKind())
	if d.cfg.HealthCheck {
		go d.watchHealth(ctx)
	}
	<-ctx.Done()
	if cause := context.Cause(ctx); !errors.Is(cause, context.Canceled) {
		return cause
	}
	logger.Info("DRA driver stopped")
	return nil
}

// setPublisher starts publishing through p.
func (d *Driver) setPublisher(p Publisher) {
	d.pubMu.Lock()
	defer d.pubMu.Unlock()
	d.publisher = p
}

// publish publishes the node's pool as it is now: cards, health, and the order of the
// prepared claims' memory. The caller must not hold mu.
func (d *Driver) publish(ctx context.Context) error {
	d.pubMu.Lock()
	defer d.pubMu.Unlock()
	if d.publisher == nil {
		return nil
	}
	p := d.publication()
	if err := d.publisher.PublishResources(ctx, p.resources()); err != nil {
		return fmt.Errorf("publish ResourceSlices: %w", err)
	}
	return nil
}

// republish is publish after a prepare, unprepare or health change, where a failure is only
// logged: the ResourceSlice controller retries on its own, and the claims are served anyway.
func (d *Driver) republish(ctx context.Context) {
	if err := d.publish(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Republishing the node's devices failed")
	}
}

// publication is what publish publishes now.
func (d *Driver) publication() *publication {
	sick, _ := d.cards.health()
	return &publication{driver: d.cfg.DriverName, pool: d.cfg.NodeName, unit: d.cfg.Names.UnitBytes(), cards: d.cards.list,
		sick: sick, allocated: d.allocated(), order: d.order}
}

// allocated is the memory the prepared claims consumed, by card index.
func (d *Driver) allocated() map[int]int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[int]int64{}
	for _, rec := range d.prepared {
		for _, s := range rec.Shares {
			out[s.Index] += s.Bytes
		}
	}
	return out
}

// HandleError is called for errors in the kubelet plugin's background work (its gRPC servers,
// publishing ResourceSlices): each is logged, and one that retrying cannot fix stops Run. So
// does an API server that drops fields of the node's ResourceSlice (kubeletplugin reports that
// as recoverable): without consumable capacity every claim would take a whole card, and
// without device taints a failed card would stay on offer, so the driver refuses to serve.
func (d *Driver) HandleError(ctx context.Context, err error, msg string) {
	klog.FromContext(ctx).Error(err, msg)
	if d.fatal == nil {
		return
	}
	var dropped *resourceslice.DroppedFieldsError
	switch {
	case errors.As(err, &dropped):
		d.fatal(fmt.Errorf("%s: %w: the driver needs a cluster with DRAConsumableCapacity and DRADeviceTaints (Kubernetes 1.36 or later with "+
			"their defaults; docs/dra.md)", msg, err))
	case !errors.Is(err, kubeletplugin.ErrRecoverable):
		d.fatal(fmt.Errorf("%s: %w", msg, err))
	}
}
