package cache

import v1 "k8s.io/api/core/v1"

// PodRequests is a pod's effective CPU (milli) and memory (bytes) requests as kube-scheduler
// counts them, the same figures the cache charges to nodes.
func PodRequests(pod *v1.Pod) (milliCPU, memory int64) { return podCPUMem(pod) }
