package contract

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
)

// ErrInvalidAllocation is wrapped by errors about a pod's placement annotations.
var ErrInvalidAllocation = errors.New("invalid gpushare placement annotation")

// Allocation is a pod's placement: container key (see ContainerRequest.Key) → GPU index → units.
// Its JSON form is the AnnotationAllocation value, e.g. {"0":{"1":4}}.
type Allocation map[string]map[int]int64

// PerGPU is what the pod holds on each GPU: per card, the larger of its largest init container
// and the sum of its app containers, as Kubernetes counts init containers.
func (a Allocation) PerGPU() map[int]int64 {
	initMax, apps := map[int]int64{}, map[int]int64{}
	for key, gpus := range a {
		for g, u := range gpus {
			if isInitKey(key) {
				initMax[g] = max(initMax[g], u)
			} else {
				apps[g] += u
			}
		}
	}
	for g, u := range initMax {
		apps[g] = max(apps[g], u)
	}
	return apps
}

// GPUs lists the GPU indexes the pod uses, ascending.
func (a Allocation) GPUs() []int {
	per := a.PerGPU()
	out := make([]int, 0, len(per))
	for g := range per {
		out = append(out, g)
	}
	sort.Ints(out)
	return out
}

// Clone returns a deep copy.
func (a Allocation) Clone() Allocation {
	out := make(Allocation, len(a))
	for k, gpus := range a {
		m := make(map[int]int64, len(gpus))
		for g, u := range gpus {
			m[g] = u
		}
		out[k] = m
	}
	return out
}

func isInitKey(key string) bool { return len(key) > 5 && key[:5] == "init-" }

// Annotations returns the pod annotations of the contract for a placement made at t.
// gpuUnits gives each GPU's memory in units.
func (a Allocation) Annotations(req *PodRequest, gpuUnits map[int]int64, t time.Time) (map[string]string, error) {
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

// Matches reports whether a placement gives every container of req exactly its units.
func (a Allocation) Matches(req *PodRequest) bool {
	if len(a) != len(req.Containers) {
		return false
	}
	for _, c := range req.Containers {
		var sum int64
		for _, u := range a[c.Key] {
			sum += u
		}
		if sum != c.Units || len(a[c.Key]) != c.GPUs {
			return false
		}
	}
	return true
}
