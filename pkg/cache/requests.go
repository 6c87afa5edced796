package cache

import (
	v1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/placement"
)

// PodResources is a pod's effective CPU (milli) and memory (bytes) requests as kube-scheduler
// counts them, the same figures the cache charges to nodes.
func PodResources(pod *v1.Pod) placement.PodResources {
	cpu, mem := podCPUMem(pod)
	return placement.PodResources{MilliCPU: cpu, Memory: mem}
}
