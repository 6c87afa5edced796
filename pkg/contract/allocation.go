package contract

import (
	"encoding/json"
	"errors"
	"fmt"
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
