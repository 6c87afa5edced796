package contract

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Default names, those of Alibaba's gpushare where one existed.
const (
	DefaultResourceName     = "aliyun.com/gpu-mem"
	DefaultCountName        = "aliyun.com/gpu-count"
	DefaultNodeGPUsKey      = "gpushare.io/gpus"
	DefaultModelKey         = "gpushare.io/gpu-model"
	DefaultGPUsPerContainer = "gpushare.io/gpu-count"
	DefaultCoreKey          = "gpushare.io/gpu-core"
	// DefaultPreemptionKey is the annotation the extender writes on a pod that preempted: the
	// card whose freed memory is held for it (preempt.HoldRecord).
	DefaultPreemptionKey = "gpushare.io/preemption"
	DefaultUnit          = "1Gi"

	// AnnotationIndex is the GPU index of a single-GPU pod.
	AnnotationIndex = "ALIYUN_COM_GPU_MEM_IDX"
	// AnnotationPod is the pod's total gpu-mem units.
	AnnotationPod = "ALIYUN_COM_GPU_MEM_POD"
	// AnnotationDev is the memory units of the pod's GPU.
	AnnotationDev = "ALIYUN_COM_GPU_MEM_DEV"
	// AnnotationAssigned is "false" after bind and "true" once the plugin's Allocate has run.
	AnnotationAssigned = "ALIYUN_COM_GPU_MEM_ASSIGNED"
	// AnnotationAssumeTime is the bind time in Unix nanoseconds.
	AnnotationAssumeTime = "ALIYUN_COM_GPU_MEM_ASSUME_TIME"
	// AnnotationAllocation is the full per-container placement as JSON, see Allocation.
	AnnotationAllocation = "scheduler.framework.gpushare.allocation"
	// AnnotationFence is the fencing token a leading extender replica puts on its Bindings and
	// pod patches, "holder/leaseTransitions" of its Lease: the API server refuses them once
	// the Lease names another term (config/admission/extender-fence.yaml). Not written with
	// leader election off.
	AnnotationFence = "gpushare.io/fence"
	// AnnotationPreemptedBy marks a pod the extender is about to delete for GPU preemption:
	// "<namespace>/<name>/<priority>" of the preemptor it holds a card for. The extender writes
	// it (under the fence) just before the DELETE, and config/admission/extender-pods.yaml lets
	// the extender's account delete a pod only when it asks gpu-mem, is not system-critical
	// and carries this mark naming a priority above its own. The API server cannot check that
	// the named preemptor exists: the mark is the extender's claim.
	AnnotationPreemptedBy = "gpushare.io/preempted-by"

	// EnvVisibleDevices names the GPU UUIDs a container may use.
	EnvVisibleDevices = "NVIDIA_VISIBLE_DEVICES"
	// EnvIndex is the GPU index (comma-separated for several GPUs).
	EnvIndex = "ALIYUN_COM_GPU_MEM_IDX"
	// EnvPod is the pod's total units.
	EnvPod = "ALIYUN_COM_GPU_MEM_POD"
	// EnvContainer is this container's units.
	EnvContainer = "ALIYUN_COM_GPU_MEM_CONTAINER"
	// EnvDev is the memory units of the container's (first) GPU.
	EnvDev = "ALIYUN_COM_GPU_MEM_DEV"

	// maxUnitDevices bounds the fake devices a plugin may advertise for one GPU, so that a
	// ListAndWatch response of a 16-GPU node stays far below kubelet's 4 MiB gRPC limit.
	maxUnitDevices = 16384
)

// ErrInvalidNames is returned by Names.Validate.
var ErrInvalidNames = errors.New("invalid gpushare names")

// Names are the configurable names of the contract. The zero value is not usable: start from
// DefaultNames.
type Names struct {
	// Resource is the extended resource a container asks memory with, in units.
	Resource v1.ResourceName
	// Count is the node resource holding the number of GPUs.
	Count v1.ResourceName
	// NodeGPUsAnnotation is the node annotation with the plugin's GPU inventory (JSON).
	NodeGPUsAnnotation string
	// ModelAnnotation is the pod annotation restricting GPU models, e.g. "A100|H100".
	ModelAnnotation string
	// GPUCountAnnotation is the pod annotation giving the number of GPUs each gpu-mem
	// container's units are split over (default 1).
	GPUCountAnnotation string
	// CoreAnnotation is the pod annotation capping each container's share of its cards' SMs,
	// in percent (1-100); enforced where the node's plugin enforces limits (HAMi-core).
	CoreAnnotation string
	// PreemptionAnnotation is the pod annotation with the card a preemption holds for the pod
	// (written by the extender only).
	PreemptionAnnotation string
	// Unit is the memory one unit of Resource stands for (1Gi by default).
	Unit resource.Quantity
}

// DefaultNames returns the names of Alibaba's gpushare with GiB units.
func DefaultNames() Names {
	return Names{
		Resource:             DefaultResourceName,
		Count:                DefaultCountName,
		NodeGPUsAnnotation:   DefaultNodeGPUsKey,
		ModelAnnotation:      DefaultModelKey,
		GPUCountAnnotation:   DefaultGPUsPerContainer,
		CoreAnnotation:       DefaultCoreKey,
		PreemptionAnnotation: DefaultPreemptionKey,
		Unit:                 resource.MustParse(DefaultUnit),
	}
}

// AddFlags registers the names as flags on fs, with n's current values as defaults.
func (n *Names) AddFlags(fs *flag.FlagSet) {
	fs.Func("resource-name", "extended resource of GPU memory (default "+string(n.Resource)+")", func(s string) error {
		n.Resource = v1.ResourceName(s)
		return nil
	})
	fs.Func("count-name", "node resource with the number of GPUs (default "+string(n.Count)+")", func(s string) error {
		n.Count = v1.ResourceName(s)
		return nil
	})
	fs.StringVar(&n.NodeGPUsAnnotation, "node-gpus-annotation", n.NodeGPUsAnnotation, "node annotation with the GPU inventory")
	fs.StringVar(&n.ModelAnnotation, "model-annotation", n.ModelAnnotation, "pod annotation restricting GPU models")
	fs.StringVar(&n.GPUCountAnnotation, "gpu-count-annotation", n.GPUCountAnnotation, "pod annotation with GPUs per container")
	fs.StringVar(&n.CoreAnnotation, "gpu-core-annotation", n.CoreAnnotation, "pod annotation capping each container's share of its GPUs' SMs, in percent (1-100)")
	fs.StringVar(&n.PreemptionAnnotation, "preemption-annotation", n.PreemptionAnnotation, "pod annotation where the extender records the card a preemption holds for the pod")
	fs.Func("unit", "memory of one unit, a binary quantity >= 1Mi (default "+n.Unit.String()+")", func(s string) error {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return fmt.Errorf("unit %q: %w", s, err)
		}
		n.Unit = q
		return nil
	})
}

// Validate reports the first problem with n.
func (n *Names) Validate() error {
	for what, v := range map[string]string{
		"resource name": string(n.Resource), "count name": string(n.Count),
		"node GPUs annotation": n.NodeGPUsAnnotation, "model annotation": n.ModelAnnotation,
		"GPU count annotation": n.GPUCountAnnotation, "GPU core annotation": n.CoreAnnotation,
		"preemption annotation": n.PreemptionAnnotation,
	} {
		if strings.TrimSpace(v) == "" {
			return fmt.Errorf("%w: %s is empty", ErrInvalidNames, what)
		}
	}
	if n.Unit.Value() < 1<<20 || n.Unit.Value()%(1<<20) != 0 {
		return fmt.Errorf("%w: unit %s must be a whole number of MiB, at least 1Mi", ErrInvalidNames, n.Unit.String())
	}
	return nil
}

// UnitBytes is the size of one unit in bytes.
func (n *Names) UnitBytes() int64 { return n.Unit.Value() }

// UnitLabel is how people read one unit: "GiB", "MiB", or the quantity itself.
func (n *Names) UnitLabel() string {
	switch n.Unit.Value() {
	case 1 << 30:
		return "GiB"
	case 1 << 20:
		return "MiB"
	case 1 << 40:
		return "TiB"
	}
	return "x" + n.Unit.String()
}

// UnitsOf converts a memory size in bytes into whole units, rounding down.
func (n *Names) UnitsOf(bytes uint64) int64 {
	return int64(bytes / uint64(n.Unit.Value())) //nolint:gosec // G115: Validate keeps Unit >= 1Mi, so the conversion is exact.
}

// CheckDeviceCount refuses a unit that would make a plugin advertise more fake devices for one
// GPU than kubelet's gRPC message limit allows.
func (n *Names) CheckDeviceCount(units int64) error {
	if units > maxUnitDevices {
		return fmt.Errorf("%w: a GPU of %d units of %s exceeds %d devices per GPU, which would overflow kubelet's 4 MiB gRPC message; use a larger unit",
			ErrInvalidNames, units, n.Unit.String(), maxUnitDevices)
	}
	return nil
}
