package contract

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// MaxCorePercent is the largest compute cap a pod may ask: the whole card.
const MaxCorePercent = 100

// CoreLimit reads the pod's compute cap (Names.CoreAnnotation): each of its gpu-mem containers
// may use at most percent of its cards' SMs. ok is false when the pod sets none; a value that
// is not an integer from 1 to MaxCorePercent is an error wrapping ErrInvalidRequest.
func CoreLimit(pod *v1.Pod, names *Names) (percent int, ok bool, err error) {
	v, found := pod.Annotations[names.CoreAnnotation]
	if !found {
		return 0, false, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 1 || n > MaxCorePercent {
		return 0, false, fmt.Errorf("%w: annotation %s=%.20q must be an integer percent of the GPU's SMs from 1 to %d",
			ErrInvalidRequest, names.CoreAnnotation, v, MaxCorePercent)
	}
	return n, true, nil
}
