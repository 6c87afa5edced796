package draconvert

import (
	"errors"
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpushare/gpushare/pkg/contract"
)

// ErrNotExpressible is wrapped by the refusal of a gpu-mem ask that is valid under the
// contract but cannot be expressed as a DRA claim. (An ask the contract itself refuses wraps
// contract.ErrInvalidRequest.)
var ErrNotExpressible = errors.New("gpu-mem ask not expressible in DRA mode")

// maxCardBytes bounds the memory one card may be asked for: contract.MaxUnitsPerGPU units of
// the smallest unit (1Mi), 1 TiB, is the most memory the contract lets a card declare, so
// no device could ever satisfy more.
const maxCardBytes = int64(contract.MaxUnitsPerGPU) << 20

// optOutHint ends every refusal of an ask DRA cannot express: how to run the pod as written.
const optOutHint = "; to run the pod unchanged on a node of the device-plugin mode, label it " + ModeLabel + "=" + ModeDevicePlugin

// deviceModeAnnotations are the pod annotations of the device-plugin mode that name a card or
// hold one: in DRA mode kube-scheduler's allocator chooses the card, and nothing reads them.
func deviceModeAnnotations(names *contract.Names) []string {
	return []string{
		contract.AnnotationIndex, contract.AnnotationPod, contract.AnnotationDev, contract.AnnotationAssigned,
		contract.AnnotationAssumeTime, contract.AnnotationAllocation, names.PreemptionAnnotation,
	}
}

// checkPod refuses what the DRA mode cannot do for the pod as a whole.
func checkPod(pod *v1.Pod, names *contract.Names) error {
	if pod.Spec.NodeName != "" {
		// A claim is allocated when kube-scheduler schedules the pod; a pod that names its
		// node skips that, and its claim would never get a card.
		return fmt.Errorf("%w: the pod sets spec.nodeName %q, but a DRA claim gets its card only when kube-scheduler schedules the pod; "+
			"choose the node with a nodeSelector or node affinity instead%s", ErrNotExpressible, pod.Spec.NodeName, optOutHint)
	}
	for _, k := range deviceModeAnnotations(names) {
		if _, ok := pod.Annotations[k]; ok {
			return fmt.Errorf("%w: annotation %s names or holds a card in the device-plugin mode; in DRA mode kube-scheduler chooses the card; "+
				"create the pod without it%s", ErrNotExpressible, k, optOutHint)
		}
	}
	return nil
}

// checkContainer refuses a container's ask that no claim can express.
func checkContainer(c contract.ContainerRequest, names *contract.Names) error {
	if c.GPUs > resourcev1.AllocationResultsMaxSize {
		return fmt.Errorf("%w: container %q asks %d GPUs; a DRA claim can hold at most %d devices%s",
			ErrNotExpressible, c.Name, c.GPUs, resourcev1.AllocationResultsMaxSize, optOutHint)
	}
	if c.PerGPU() > maxCardBytes/names.UnitBytes() {
		return fmt.Errorf("%w: container %q asks %d units of %s (%s each) on each of its %d GPUs, more than the %d GiB any GPU could hold%s",
			ErrNotExpressible, c.Name, c.PerGPU(), names.Resource, names.Unit.String(), c.GPUs, maxCardBytes>>30, optOutHint)
	}
	return nil
}

// checkClaimNames refuses a pod that already has a claim of a name the conversion adds.
func checkClaimNames(pod *v1.Pod, claims []Claim) error {
	for _, c := range claims {
		if slices.ContainsFunc(pod.Spec.ResourceClaims, func(rc v1.PodResourceClaim) bool { return rc.Name == c.PodClaimName }) {
			return fmt.Errorf("%w: the pod already has a resource claim named %q, the name gpushare gives the claim of container %q; "+
				"rename the pod's claim%s", ErrNotExpressible, c.PodClaimName, c.Container, optOutHint)
		}
	}
	return nil
}
