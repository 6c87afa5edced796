package cache

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TrimObject is the extender's informer transform: it drops from pods and nodes what neither
// the cache nor Bind reads (managed fields everywhere; on pods the volumes, container
// statuses and each container's command, env, ports, mounts and probes; on nodes the images and
// volume lists), so that a cluster of 50,000 pods costs the extender what placement needs, not
// whole objects. Kept: metadata but managed fields, on pods the scheduling fields (resources of
// every container, node name, selectors, affinity, tolerations, overhead, priority) and the
// phase and conditions, on nodes labels, annotations, taints, allocatable and conditions.
func TrimObject(obj any) (any, error) {
	switch o := obj.(type) {
	case *v1.Pod:
		o.ManagedFields = nil
		o.Spec.Volumes = nil
		trimContainers(o.Spec.InitContainers)
		trimContainers(o.Spec.Containers)
		o.Spec.EphemeralContainers = nil
		o.Status.ContainerStatuses, o.Status.InitContainerStatuses, o.Status.EphemeralContainerStatuses = nil, nil, nil
		o.Status.ResourceClaimStatuses = nil
	case *v1.Node:
		o.ManagedFields = nil
		o.Status.Images = nil
		o.Status.VolumesAttached, o.Status.VolumesInUse = nil, nil
	case metav1.Object:
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// trimContainers keeps each container's name, image and resources.
func trimContainers(cs []v1.Container) {
	for i := range cs {
		c := &cs[i]
		*c = v1.Container{Name: c.Name, Image: c.Image, Resources: c.Resources, RestartPolicy: c.RestartPolicy}
	}
}
