package scheduler

import (
	v1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
)

// observe tells a learning policy about a pod the extender placed.
func (e *Extender) observe(pod *v1.Pod, req *contract.PodRequest) {
	l, ok := e.policy.(Learner)
	if !ok {
		return
	}
	cpu, mem := cache.PodRequests(pod)
	l.Observe(req, PodResources{MilliCPU: cpu, Memory: mem})
}

// Relearn rebuilds a learning policy's distribution from the pods in the cache. Call it once
// the informers have synced (after a restart the pods already running are the best sample of
// the workload); it does nothing for other policies.
func (e *Extender) Relearn() {
	if l, ok := e.policy.(Learner); ok {
		l.Rebuild(e.cache.Nodes())
	}
}
