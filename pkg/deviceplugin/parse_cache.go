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

// parseCache saves Allocate from decoding every pod's placement JSON on every call.
type parseCache struct {
	entries map[types.UID]parsedPod
}

// parseLocked returns pod's request and placement (ok false: no placement). Caller holds
// p.tracker.mu, which guards the cache too.
func (p *Plugin) parseLocked(pod *v1.Pod, livePods int) (contract.PodRequest, contract.Allocation, bool, error) {
	from := [3]string{pod.Annotations[contract.AnnotationAllocation], pod.Annotations[contract.AnnotationIndex],
		pod.Annotations[p.cfg.names.GPUCountAnnotation] + "|" + pod.Annotations[p.cfg.names.ModelAnnotation] +
			"|" + pod.Annotations[p.cfg.names.CoreAnnotation]}
	if e, hit := p.cache.entries[pod.UID]; hit && e.from == from {
		return e.req, e.alloc, e.ok, e.err
	}
	if p.cache.entries == nil || len(p.cache.entries) > 4*livePods+64 {
		p.cache.entries = map[types.UID]parsedPod{} // forget deleted pods now and then
	}
	e := parsedPod{from: from}
	e.req, e.err = contract.ParseRequest(pod, &p.cfg.names)
	if e.err == nil && !e.req.Empty() {
		e.alloc, e.ok, e.err = contract.AllocationFromPod(pod, &e.req)
	}
	p.cache.entries[pod.UID] = e
	return e.req, e.alloc, e.ok, e.err
}
