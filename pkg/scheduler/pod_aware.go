package scheduler

import (
	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
)

// PodResources is what a pod asks of a node besides GPU memory, as kube-scheduler counts it.
type PodResources struct {
	// MilliCPU is the pod's CPU request in millicores.
	MilliCPU int64
	// Memory is the pod's memory request in bytes.
	Memory int64
}

// PodAware is an optional Policy extension for policies that weigh the pod's CPU and memory
// (a Policy's methods only see its GPU request). ForPod returns the policy specialised to one
// pod; the result serves one placement decision and is used by one goroutine only.
type PodAware interface {
	Policy
	ForPod(res PodResources) Policy
}

// ForPod specialises policy to a pod when it is PodAware, and returns it unchanged otherwise.
// Prioritize, bind and the simulator score through the result.
func ForPod(policy Policy, res PodResources) Policy {
	if pa, ok := policy.(PodAware); ok {
		return pa.ForPod(res)
	}
	return policy
}

// Learner is an optional Policy extension for policies that learn the workload. The extender
// calls Observe once per pod it binds; the simulator calls it when a pod is submitted. Rebuild
// replaces what was learned with the pods the cache holds (after a restart).
type Learner interface {
	Observe(req *contract.PodRequest, res PodResources)
	Rebuild(nodes []*cache.NodeInfo)
}

// NodeSyncer is an optional Policy extension for policies that keep state per node name. The
// extender calls SyncNodes now and then with every node's snapshot, so that the policy drops
// what it holds for deleted nodes and counts nodes it has not scored yet.
type NodeSyncer interface {
	SyncNodes(nodes []*cache.NodeInfo)
}
