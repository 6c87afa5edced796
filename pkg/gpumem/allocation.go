package gpumem

import (
	"maps"
	"sort"
)

// Allocation is a pod's placement: container key (see ContainerRequest.Key) → GPU index → units.
// Its JSON form is the value of the contract's placement annotation, e.g. {"0":{"1":4}}.
type Allocation map[string]map[int]int64

// PerGPU is what the pod holds on each GPU: per card, the larger of its largest init container
// and the sum of its app containers, as Kubernetes counts init containers.
func (a Allocation) PerGPU() map[int]int64 {
	initMax, apps := map[int]int64{}, map[int]int64{}
	for key, gpus := range a {
		for g, u := range gpus {
			if IsInitKey(key) {
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

// Equal reports whether a and b place the same units on the same GPUs for the same containers
// (a nil map and an empty one are equal).
func (a Allocation) Equal(b Allocation) bool {
	return maps.EqualFunc(a, b, maps.Equal)
}

// IsInitKey reports whether an Allocation key names an init container.
func IsInitKey(key string) bool { return len(key) > 5 && key[:5] == "init-" }

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
