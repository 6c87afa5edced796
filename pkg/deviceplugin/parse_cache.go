package deviceplugin

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/contract"
)

// parsedPod is a pod's request and placement, with the annotations they were read from.
// gpu-mem limits cannot change after creation, so annotations are all that can make it stale.
type parsedPod struct {
	from  [3]string
	req   contract.PodRequest
	alloc contract.Allocation
	ok    bool
	err   error
}

// parseCache saves Allocate from decoding every pod's placement JSON on every call. It is part
// of the admission ledger: owned by the tracker and guarded by its mu.
type parseCache struct {
	entries map[types.UID]parsedPod
}

// parseLocked returns pod's request and placement under names (ok false: no placement).
// livePods, the number of pods on the node, bounds the cache. Caller holds the owning
// tracker's mu.
func (c *parseCache) parseLocked(pod *v1.Pod, names *contract.Names, livePods int) (contract.PodRequest, contract.Allocation, bool, error) {
	from := [3]string{pod.Annotations[contract.AnnotationAllocation], pod.Annotations[contract.AnnotationIndex],
		pod.Annotations[names.GPUCountAnnotation] + "|" + pod.Annotations[names.ModelAnnotation] +
			"|" + pod.Annotations[names.CoreAnnotation]}
	if e, hit := c.entries[pod.UID]; hit && e.from == from {
		return e.req, e.alloc, e.ok, e.err
	}
	if c.entries == nil || len(c.entries) > 4*livePods+64 {
		c.entries = map[types.UID]parsedPod{} // forget deleted pods now and then
	}
	e := parsedPod{from: from}
	e.req, e.err = contract.ParseRequest(pod, names)
	if e.err == nil && !e.req.Empty() {
		e.alloc, e.ok, e.err = contract.AllocationFromPod(pod, &e.req)
	}
	c.entries[pod.UID] = e
	return e.req, e.alloc, e.ok, e.err
}
