package feed

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gpushare/gpushare/pkg/contract"
)

// Trimmer returns the extender's informer transform: it drops from pods and nodes what neither
// the cache nor Bind reads, so that a cluster of 50,000 pods costs the extender what placement
// needs, not whole objects (`make bench-scale`).
//
// Every object loses its managed fields. Pods lose their volumes, container statuses and each
// container's command, env, ports, mounts and probes; a container whose requests equal its
// limits (the API server's default when only limits are given) shares one map for both. A pod
// bound to a node keeps only what the cache charges it by: its identity, the annotations of the
// contract (names), node name, containers' resources, overhead and phase; a pending pod also
// keeps what Bind checks (node selector, affinity, tolerations) and its conditions. Nodes keep
// their metadata, spec (Bind checks labels and taints) and, of their status, capacity and
// allocatable: conditions, addresses, system info, images and volumes go.
func Trimmer(names contract.Names) toolscache.TransformFunc {
	keep := keptAnnotations(names)
	return func(obj any) (any, error) {
		switch o := obj.(type) {
		case *v1.Pod:
			trimPod(o, keep)
		case *v1.Node:
			o.ManagedFields = nil
			o.Status = v1.NodeStatus{Capacity: o.Status.Capacity, Allocatable: o.Status.Allocatable}
		case metav1.Object:
			o.SetManagedFields(nil)
		}
		return obj, nil
	}
}

// keptAnnotations are the annotations a bound pod keeps: the contract's.
func keptAnnotations(names contract.Names) map[string]bool {
	return map[string]bool{contract.AnnotationIndex: true, contract.AnnotationPod: true, contract.AnnotationDev: true,
		contract.AnnotationAssigned: true, contract.AnnotationAssumeTime: true, contract.AnnotationAllocation: true,
		names.ModelAnnotation: true, names.GPUCountAnnotation: true, names.CoreAnnotation: true}
}

// trimPod trims pod in place; keep lists the annotations a bound pod keeps.
func trimPod(p *v1.Pod, keep map[string]bool) {
	p.ManagedFields = nil
	p.Spec.Volumes = nil
	trimContainers(p.Spec.InitContainers)
	trimContainers(p.Spec.Containers)
	p.Spec.EphemeralContainers = nil
	p.Status.ContainerStatuses, p.Status.InitContainerStatuses, p.Status.EphemeralContainerStatuses = nil, nil, nil
	p.Status.ResourceClaimStatuses = nil
	if p.Spec.NodeName == "" {
		return
	}
	for k := range p.Annotations {
		if !keep[k] {
			delete(p.Annotations, k)
		}
	}
	p.Spec.NodeSelector, p.Spec.Affinity, p.Spec.Tolerations, p.Spec.TopologySpreadConstraints = nil, nil, nil, nil
	p.Spec.SchedulingGates, p.Spec.ReadinessGates = nil, nil
	p.Status.Conditions = nil
}

// trimContainers keeps each container's name, image and resources.
func trimContainers(cs []v1.Container) {
	for i := range cs {
		c := &cs[i]
		res := c.Resources
		if sameQuantities(res.Requests, res.Limits) {
			res.Requests = res.Limits // read-only from here on: one map for both
		}
		*c = v1.Container{Name: c.Name, Image: c.Image, Resources: res, RestartPolicy: c.RestartPolicy}
	}
}

// sameQuantities reports whether a and b hold the same quantities of the same resources.
func sameQuantities(a, b v1.ResourceList) bool {
	if len(a) == 0 || len(a) != len(b) {
		return false
	}
	for k, q := range a {
		if q2, ok := b[k]; !ok || q.Cmp(q2) != 0 {
			return false
		}
	}
	return true
}
