package cache

import (
	"sync"

	v1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/gpumem"
)

// maxSharedAllocations bounds allocationTable: distinct placement annotations beyond it are
// decoded per pod, as without the table.
const maxSharedAllocations = 1 << 14

// allocationTable shares the decoded placement of bound pods whose placement annotation is the
// same string: most pods of a cluster hold one of a few placements ({"0":{"1":4}}), and
// decoding each pod's into maps of its own was a quarter of the extender's heap at 50,000 pods.
// Shared placements are immutable, as every placement the cache hands out already is. Safe for
// concurrent use.
type allocationTable struct {
	mu    sync.Mutex
	byRaw map[string]sharedAllocation
}

// sharedAllocation is a decoded placement and its per-GPU sums.
type sharedAllocation struct {
	alloc  gpumem.Allocation
	perGPU map[int]int64
}

// fromPod is contract.AllocationFromPod with the per-GPU sums, shared with every other pod
// whose placement annotation is the same.
func (t *allocationTable) fromPod(pod *v1.Pod, req *contract.PodRequest) (gpumem.Allocation, map[int]int64, bool, error) {
	raw, annotated := pod.Annotations[contract.AnnotationAllocation]
	if !annotated {
		alloc, ok, err := contract.AllocationFromPod(pod, req)
		if !ok || err != nil {
			return nil, nil, ok, err
		}
		return alloc, alloc.PerGPU(), true, nil
	}
	t.mu.Lock()
	s, found := t.byRaw[raw]
	t.mu.Unlock()
	if found {
		return s.alloc, s.perGPU, true, nil
	}
	alloc, err := contract.DecodeAllocation(raw)
	if err != nil {
		return nil, nil, false, err
	}
	s = sharedAllocation{alloc: alloc, perGPU: alloc.PerGPU()}
	t.mu.Lock()
	if t.byRaw == nil {
		t.byRaw = map[string]sharedAllocation{}
	}
	if len(t.byRaw) < maxSharedAllocations {
		t.byRaw[raw] = s
	}
	t.mu.Unlock()
	return s.alloc, s.perGPU, true, nil
}
