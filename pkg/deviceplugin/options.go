package deviceplugin

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/enforce"
)

// ErrInvalidConfig is wrapped by configuration errors.
var ErrInvalidConfig = errors.New("invalid device plugin configuration")

// config is the plugin's effective configuration; see the With* options.
type config struct {
	names        contract.Names
	nodeName     string
	kubeletDir   string
	socketName   string
	pods         PodSource
	podResources PodResourcesSource
	resolveWait  time.Duration
	resyncPeriod time.Duration
	verifyTTL    time.Duration
	health       bool
	memoryLimit  MemoryLimitConfig
	sysfsRoot    string
	logger       klog.Logger
	// counterMounter, when set, replaces the tmpfs mounts bounding HAMi-core's counter folders
	// (tests fake it).
	counterMounter enforce.Mounter
	// images, when set, checks each container's image before it starts (PreStartContainer).
	images ImageChecker
	// reserveMemory is held back of every card on top of the driver's reserve, in bytes.
	reserveMemory int64
	// ignoredXIDs are the XIDs that leave a card healthy (the application's faults).
	ignoredXIDs []uint64
}

func defaultConfig() config {
	return config{
		names:        contract.DefaultNames(),
		kubeletDir:   pluginapi.DevicePluginPath,
		socketName:   "gpushare.sock",
		resolveWait:  3 * time.Second,
		resyncPeriod: 2 * time.Second,
		verifyTTL:    2 * time.Minute,
		health:       true,
		memoryLimit:  DefaultMemoryLimitConfig(),
		sysfsRoot:    "/sys",
		logger:       klog.Background(),
		ignoredXIDs:  DefaultIgnoredXIDs(),
	}
}

// WithReserveMemory holds back bytes of every card's memory, on top of what the driver keeps
// for itself: a card's units count its total less both. Default 0.
func WithReserveMemory(bytes int64) Option { return func(c *config) { c.reserveMemory = bytes } }

// WithIgnoredXIDs sets the XIDs that leave a card healthy: faults of the application, not of
// the card. It replaces the default, DefaultIgnoredXIDs; an empty list ignores none.
func WithIgnoredXIDs(xids []uint64) Option {
	return func(c *config) { c.ignoredXIDs = append([]uint64(nil), xids...) }
}

// withCounterMounter replaces the tmpfs mounts of the counter folders (tests that cannot
// mount).
func withCounterMounter(m enforce.Mounter) Option { return func(c *config) { c.counterMounter = m } }

// WithImageChecker checks, before each container with gpu-mem units starts, that its image
// cannot redirect the enforcement backend's mounts (PreStartContainer). Default: none.
func WithImageChecker(c ImageChecker) Option { return func(cfg *config) { cfg.images = c } }

// Option changes the plugin's configuration.
type Option func(*config)

// WithNames sets the contract's names (resource, annotations, unit). Default contract.DefaultNames().
func WithNames(n contract.Names) Option { return func(c *config) { c.names = n } }

// WithNodeName sets the node the plugin runs on (required).
func WithNodeName(name string) Option { return func(c *config) { c.nodeName = name } }

// WithKubeletDir sets the device-plugin directory holding kubelet.sock and the plugin's socket.
// Default /var/lib/kubelet/device-plugins/.
func WithKubeletDir(dir string) Option { return func(c *config) { c.kubeletDir = dir } }

// WithSocketName sets the plugin's socket file name in the kubelet dir. Default gpushare.sock.
func WithSocketName(name string) Option { return func(c *config) { c.socketName = name } }

// WithPodSource sets where the plugin reads the pods bound to its node. Default: an informer on
// the API server (see NewInformerPodSource), started by Run.
func WithPodSource(s PodSource) Option { return func(c *config) { c.pods = s } }

// WithPodResources sets the kubelet's view of pods and their devices. Default none: Allocate
// then relies on kubelet's admission order alone and misguesses are not corrected (see
// docs/deviceplugin.md). cmd/share-plugin passes NewPodResourcesClient.
func WithPodResources(s PodResourcesSource) Option { return func(c *config) { c.podResources = s } }

// WithResolveWait bounds how long Allocate waits for a pod to show up in the PodSource (the
// informer may lag the kubelet). Default 3s; 0 answers at once.
func WithResolveWait(d time.Duration) Option { return func(c *config) { c.resolveWait = d } }

// WithResyncPeriod sets how often the reconciler cross-checks Allocate's choices against the
// PodResources source and marks pods assigned. Default 2s.
func WithResyncPeriod(d time.Duration) Option { return func(c *config) { c.resyncPeriod = d } }

// WithSysfsRoot sets where sysfs is mounted: a card whose NUMA node NVML does not know gets the
// one in <root>/bus/pci/devices/<PCI bus ID>/numa_node. Default /sys.
func WithSysfsRoot(root string) Option { return func(c *config) { c.sysfsRoot = root } }

// WithHealthCheck turns the NVML XID watch on or off. Default on.
func WithHealthCheck(on bool) Option { return func(c *config) { c.health = on } }

func (c *config) validate() error {
	if err := c.names.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	switch {
	case c.nodeName == "":
		return fmt.Errorf("%w: node name is empty (set --node-name or NODE_NAME)", ErrInvalidConfig)
	case c.kubeletDir == "":
		return fmt.Errorf("%w: kubelet dir is empty", ErrInvalidConfig)
	case c.socketName == "" || c.socketName == "kubelet.sock":
		return fmt.Errorf("%w: socket name %q", ErrInvalidConfig, c.socketName)
	case c.resyncPeriod <= 0:
		return fmt.Errorf("%w: resync period must be positive", ErrInvalidConfig)
	case c.reserveMemory < 0:
		return fmt.Errorf("%w: reserved memory %d bytes is negative", ErrInvalidConfig, c.reserveMemory)
	}
	return ValidateMemoryLimit(c.memoryLimit)
}

// WithLogger sets the logger of gRPC handlers (Run's ctx logger is used elsewhere). Default
// klog.Background().
func WithLogger(l klog.Logger) Option { return func(c *config) { c.logger = l } }
