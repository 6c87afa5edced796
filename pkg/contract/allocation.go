package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

// ErrInvalidAllocation is wrapped by errors about a pod's placement annotations.
var ErrInvalidAllocation = errors.New("invalid gpushare placement annotation")

// Allocation is a pod's placement (see gpumem.Allocation).
type Allocation = gpumem.Allocation

// PlacementAnnotations returns the pod annotations of the contract for placement a made at t.
// gpuUnits gives each GPU's memory in units.
func PlacementAnnotations(a Allocation, req *PodRequest, gpuUnits map[int]int64, t time.Time) (map[string]string, error) {
	raw, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("encode allocation: %w", err)
	}
	gpus := a.GPUs()
	if len(gpus) == 0 {
		return nil, fmt.Errorf("%w: empty allocation", ErrInvalidAllocation)
	}
	return map[string]string{
		AnnotationIndex:      strconv.Itoa(gpus[0]),
		AnnotationPod:        strconv.FormatInt(req.TotalUnits(), 10),
		AnnotationDev:        strconv.FormatInt(gpuUnits[gpus[0]], 10),
		AnnotationAssigned:   "false",
		AnnotationAssumeTime: strconv.FormatInt(t.UnixNano(), 10),
		AnnotationAllocation: string(raw),
	}, nil
}

// AllocationFromPod reads a pod's placement. It prefers AnnotationAllocation and falls back to
// the predecessor's single-GPU AnnotationIndex, placing every gpu-mem container of req there.
// ok is false when the pod carries neither.
func AllocationFromPod(pod *v1.Pod, req *PodRequest) (Allocation, bool, error) {
	if raw, found := pod.Annotations[AnnotationAllocation]; found {
		a, err := DecodeAllocation(raw)
		return a, err == nil, err
	}
	idx, found := pod.Annotations[AnnotationIndex]
	if !found {
		return nil, false, nil
	}
	g, err := strconv.Atoi(idx)
	if err != nil || g < 0 {
		return nil, false, fmt.Errorf("%w: %s=%q is not a GPU index", ErrInvalidAllocation, AnnotationIndex, idx)
	}
	a := Allocation{}
	for _, c := range req.Containers {
		a[c.Key] = map[int]int64{g: c.Units}
	}
	return a, true, nil
}

// DecodeAllocation parses and checks an AnnotationAllocation value.
func DecodeAllocation(raw string) (Allocation, error) {
	var a Allocation
	if err := json.Unmarshal([]byte(raw), &a); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrInvalidAllocation, AnnotationAllocation, err)
	}
	for key, gpus := range a {
		for g, u := range gpus {
			if g < 0 || u <= 0 || u > MaxUnitsPerContainer {
				return nil, fmt.Errorf("%w: %s: container %s has %d units on GPU %d", ErrInvalidAllocation, AnnotationAllocation, key, u, g)
			}
		}
	}
	if len(a) == 0 {
		return nil, fmt.Errorf("%w: %s is empty", ErrInvalidAllocation, AnnotationAllocation)
	}
	return a, nil
}

// CheckPlacement reports whether placement (GPU index → units) is one the extender makes for
// container c: c's ask split evenly over exactly c.GPUs distinct cards, c.PerGPU() units on
// each, so that its units add up to c.Units. Anything else (a placement annotation written by
// hand, say, that gives a one-unit container two whole cards) is an error wrapping
// ErrInvalidAllocation that names the container, its ask and the placement.
func CheckPlacement(c ContainerRequest, placement map[int]int64) error {
	var total int64
	even := c.GPUs >= 1
	for _, u := range placement {
		total += u
		even = even && u == c.PerGPU()
	}
	if even && total == c.Units && len(placement) == c.GPUs {
		return nil
	}
	return fmt.Errorf("%w: container %q (key %s) asks %d units over %d GPU(s), %d on each, but %s places %s on it: %d units over %d GPU(s)",
		ErrInvalidAllocation, c.Name, c.Key, c.Units, c.GPUs, perGPUOrZero(c), AnnotationAllocation, formatPlacement(placement), total, len(placement))
}

// CheckAllocation reports whether a is a placement the extender makes for req: every gpu-mem
// container of req placed as CheckPlacement requires, and no other container key. The error
// wraps ErrInvalidAllocation and names the first container found wrong, in req's order.
func CheckAllocation(a Allocation, req *PodRequest) error {
	keys := make(map[string]bool, len(req.Containers))
	for _, c := range req.Containers {
		if err := CheckPlacement(c, a[c.Key]); err != nil {
			return err
		}
		keys[c.Key] = true
	}
	var extra []string
	for key := range a {
		if !keys[key] {
			extra = append(extra, key)
		}
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		return fmt.Errorf("%w: %s places container key(s) %q, which ask no GPU memory", ErrInvalidAllocation, AnnotationAllocation, extra)
	}
	return nil
}

// perGPUOrZero is c.PerGPU(), 0 for a request without cards (not one ParseRequest makes).
func perGPUOrZero(c ContainerRequest) int64 {
	if c.GPUs < 1 {
		return 0
	}
	return c.PerGPU()
}

// formatPlacement writes a container's placement as the annotation does, e.g. {"0":8,"1":8}.
func formatPlacement(p map[int]int64) string {
	if len(p) == 0 {
		return "{}" // nil marshals as null
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return fmt.Sprint(p)
	}
	return string(raw)
}
