package contract

import v1 "k8s.io/api/core/v1"

// PodCPUMemory is a pod's effective CPU (milli) and memory (bytes) requests as kube-scheduler
// counts them (NodeResourcesFit), the figures the cache charges to nodes and placement
// weighs: max of the largest init container and the sum of app containers, plus overhead.
func PodCPUMemory(pod *v1.Pod) (milliCPU, memory int64) {
	for i := range pod.Spec.Containers {
		r := pod.Spec.Containers[i].Resources.Requests
		milliCPU += r.Cpu().MilliValue()
		memory += r.Memory().Value()
	}
	for i := range pod.Spec.InitContainers {
		r := pod.Spec.InitContainers[i].Resources.Requests
		milliCPU = max(milliCPU, r.Cpu().MilliValue())
		memory = max(memory, r.Memory().Value())
	}
	if o := pod.Spec.Overhead; o != nil {
		milliCPU += o.Cpu().MilliValue()
		memory += o.Memory().Value()
	}
	return milliCPU, memory
}
