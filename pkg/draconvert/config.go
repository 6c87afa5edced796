package draconvert

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gpushare/gpushare/pkg/contract"
)

// Defaults of the DRA side of the conversion. They must equal what the DRA kubelet plugin
// publishes (pkg/dra) and the DeviceClass it ships with.
const (
	// DefaultDriver is the DRA driver name: the domain of the devices' attributes and
	// capacities.
	DefaultDriver = "gpushare.aliyun.com"
	// DefaultDeviceClass is the DeviceClass every claim asks devices of.
	DefaultDeviceClass = "gpushare.aliyun.com"
	// AttributeModel is the device attribute with the card's product name (a string).
	AttributeModel = "model"
	// AttributeUUID is the device attribute with the card's UUID: two cards never share it.
	AttributeUUID = "uuid"
	// CapacityMemory is the consumable capacity of a card's memory, in bytes.
	CapacityMemory = "memory"
	// CapacityCores is the consumable capacity of a card's SMs, in percent (0-100). The driver
	// must give it a request policy whose default is 0: a claim that does not ask cores (a pod
	// without the core annotation) otherwise consumes the whole card's cores, and the card
	// could not be shared.
	CapacityCores = "cores"
)

// Names of the pod side of the conversion.
const (
	// ModeLabel on a pod or its namespace chooses the mode its GPU asks run in; the value
	// ModeDevicePlugin keeps the pod as written, for a node of the device-plugin mode.
	ModeLabel = "gpushare.io/mode"
	// ModeDevicePlugin is ModeLabel's value that opts out of the conversion.
	ModeDevicePlugin = "device-plugin"
	// AnnotationConverted is written on every converted pod: a JSON object of each converted
	// container's name and the units of gpu-mem it asked, e.g. {"main":4}. The pod's own spec
	// no longer says so once gpu-mem has left its limits, and the admission policies that
	// guard GPU pods (config/admission/pod-requests.yaml) recognise a converted pod by it.
	AnnotationConverted = "gpushare.io/gpu-mem-dra"
	// ClaimPrefix starts the name of every pod claim and claim template the conversion
	// writes. A pod claim is ClaimPrefix and the container's key in the contract's placement
	// ("0", "1", … for app containers, "init-0", … for init containers).
	ClaimPrefix = "gpushare-"
	// RequestName is the name of the one request of every claim.
	RequestName = "gpu"
	// ManagedByLabel marks the claim templates the conversion creates, and the claims made
	// from them, with ManagedBy.
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedBy is ManagedByLabel's value.
	ManagedBy = "gpushare"
)

// ErrInvalidConfig is wrapped by Config.Validate's errors.
var ErrInvalidConfig = errors.New("invalid DRA conversion config")

// Config is what a conversion needs besides the pod.
type Config struct {
	// Names are the contract's names: the resource a container asks memory with, its unit,
	// and the pod annotations for the number of cards, the models and the compute cap.
	Names contract.Names
	// Driver is the DRA driver name, the domain of the device attributes the claims select on.
	Driver string
	// DeviceClass is the DeviceClass the claims ask devices of.
	DeviceClass string
}

// DefaultConfig is the config for names with the default driver and device class.
func DefaultConfig(names contract.Names) Config {
	return Config{Names: names, Driver: DefaultDriver, DeviceClass: DefaultDeviceClass}
}

// Validate reports the first problem with c.
func (c *Config) Validate() error {
	if err := c.Names.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	if errs := validation.IsDNS1123Subdomain(c.Driver); len(errs) > 0 {
		return fmt.Errorf("%w: driver %q: %v", ErrInvalidConfig, c.Driver, errs)
	}
	if errs := validation.IsDNS1123Subdomain(c.DeviceClass); len(errs) > 0 {
		return fmt.Errorf("%w: device class %q: %v", ErrInvalidConfig, c.DeviceClass, errs)
	}
	return nil
}
