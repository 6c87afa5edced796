package dra

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/enforce"
)

// DefaultDriverName is the driver's default name, which is also the domain of its device
// attributes and capacities, the DeviceClass's name and the vendor of its CDI devices. It sits
// beside aliyun.com/gpu-mem, the resource whose asks DRA mode serves, so that a claim, a slice
// and a CDI device read as the same product's, and it is the name the admission step that
// turns gpu-mem asks into claims (pkg/draconvert) writes them for: the two must agree.
const DefaultDriverName = "gpushare.aliyun.com"

// DefaultCDIRoot is where the container runtime reads CDI specs (containerd's and CRI-O's
// default cdi_spec_dirs include it).
const DefaultCDIRoot = "/var/run/cdi"

// ErrInvalidConfig is wrapped by configuration errors.
var ErrInvalidConfig = errors.New("invalid DRA driver configuration")

// Config is the driver's configuration.
type Config struct {
	// DriverName names the driver to kubelet and in ResourceSlices, claims and DeviceClasses.
	DriverName string
	// NodeName is the node the driver runs on; its pool is named after it.
	NodeName string
	// Names carries the unit: a card's memory capacity is a whole number of units, and a
	// claim consumes memory in multiples of it.
	Names contract.Names
	// ReserveMemory is held back of every card on top of the driver's own reserve, in bytes.
	ReserveMemory int64
	// CDIRoot is the folder the driver writes one CDI spec per prepared claim into.
	CDIRoot string
	// PluginsDir is kubelet's plugins folder: the driver's socket goes in PluginsDir/DriverName.
	PluginsDir string
	// RegistryDir is kubelet's plugin registration folder.
	RegistryDir string
	// SysfsRoot is where sysfs is mounted (PCIe root and NUMA node of cards NVML does not place).
	SysfsRoot string
	// DeviceOrder names the order devices are published in (OrderNames).
	DeviceOrder string
	// HealthCheck watches NVML XID events and taints the cards that have a critical one.
	HealthCheck bool
	// IgnoredXIDs leave a card healthy (device-plugin mode's list, DefaultIgnoredXIDs).
	IgnoredXIDs []uint64
	// Enforce says how claims are held to what they consumed (the device plugin's
	// --memory-limit and its HAMi-core settings). Its CollectAfter is not used: see New.
	Enforce enforce.Config
}

// DefaultConfig is the driver's defaults: index order, health checked, HAMi-core off.
func DefaultConfig() Config {
	return Config{
		DriverName:  DefaultDriverName,
		Names:       contract.DefaultNames(),
		CDIRoot:     DefaultCDIRoot,
		PluginsDir:  kubeletplugin.KubeletPluginsDir,
		RegistryDir: kubeletplugin.KubeletRegistryDir,
		SysfsRoot:   "/sys",
		DeviceOrder: OrderIndex,
		HealthCheck: true,
		IgnoredXIDs: deviceplugin.DefaultIgnoredXIDs(),
		Enforce:     enforce.DefaultConfig(),
	}
}

// Validate reports every problem of c, each wrapping ErrInvalidConfig.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	// The name is also the CDI vendor, which must start with a letter.
	if msgs := validation.IsDNS1123Subdomain(c.DriverName); len(msgs) > 0 || len(c.DriverName) > resourceapi.DriverNameMaxLength ||
		c.DriverName[0] < 'a' || c.DriverName[0] > 'z' {
		bad("driver name %q must be a DNS subdomain of at most %d characters that starts with a letter %v", c.DriverName,
			resourceapi.DriverNameMaxLength, msgs)
	}
	if c.NodeName == "" {
		bad("node name is empty (set --node-name or NODE_NAME)")
	}
	if err := c.Names.Validate(); err != nil {
		bad("%v", err)
	}
	if c.ReserveMemory < 0 {
		bad("reserved memory %d bytes is negative", c.ReserveMemory)
	}
	for what, dir := range map[string]string{"CDI root": c.CDIRoot, "kubelet plugins folder": c.PluginsDir,
		"kubelet registration folder": c.RegistryDir, "sysfs root": c.SysfsRoot} {
		if !filepath.IsAbs(dir) {
			bad("%s %q must be an absolute path", what, dir)
		}
	}
	if _, ok := orders()[c.DeviceOrder]; !ok {
		bad("device order %q: want one of %s", c.DeviceOrder, strings.Join(OrderNames(), ", "))
	}
	if err := c.Enforce.Validate(); err != nil {
		bad("%v", err)
	}
	return errors.Join(errs...)
}

// pluginDir is the folder of the driver's DRA socket.
func (c *Config) pluginDir() string { return filepath.Join(c.PluginsDir, c.DriverName) }

// cdiKind is the CDI kind of the driver's devices: "<driver>/gpu".
func (c *Config) cdiKind() string { return c.DriverName + "/gpu" }
