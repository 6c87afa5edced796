package deviceplugin

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// kubeletView is the PodResources answer reduced to one resource: pod → container → devices.
// A nil view means the kubelet's view is unknown.
type kubeletView struct {
	pods map[types.NamespacedName]map[string]string
}

// newKubeletView keeps the devices of resource.
func newKubeletView(list []*podresourcesv1.PodResources, resource v1.ResourceName) *kubeletView {
	kv := &kubeletView{pods: make(map[types.NamespacedName]map[string]string, len(list))}
	for _, p := range list {
		nn := types.NamespacedName{Namespace: p.GetNamespace(), Name: p.GetName()}
		containers := map[string]string{}
		for _, c := range p.GetContainers() {
			var ids []string
			for _, d := range c.GetDevices() {
				if d.GetResourceName() == string(resource) {
					ids = append(ids, d.GetDeviceIds()...)
				}
			}
			if len(ids) > 0 {
				containers[c.GetName()] = devicesKey(ids)
			}
		}
		kv.pods[nn] = containers
	}
	return kv
}

// awaitsUnseen reports whether the kubelet holds a pod that has no devices of the resource yet
// and is not among pods (the API server's pods of the node, as the plugin has seen them).
func (kv *kubeletView) awaitsUnseen(pods []*v1.Pod) bool {
	seen := make(map[types.NamespacedName]bool, len(pods))
	for _, p := range pods {
		seen[types.NamespacedName{Namespace: p.Namespace, Name: p.Name}] = true
	}
	for nn, containers := range kv.pods {
		if len(containers) == 0 && !seen[nn] {
			return true
		}
	}
	return false
}

// knows reports whether the kubelet holds the pod; true when the view is unknown.
func (kv *kubeletView) knows(nn types.NamespacedName) bool {
	if kv == nil {
		return true
	}
	_, ok := kv.pods[nn]
	return ok
}

// hasDevices reports whether the kubelet shows devices of the resource for a container.
func (kv *kubeletView) hasDevices(nn types.NamespacedName, container string) bool {
	if kv == nil {
		return false
	}
	_, ok := kv.pods[nn][container]
	return ok
}

// owners maps each device set to the containers holding exactly it.
func (kv *kubeletView) owners() map[string][]ownerRef {
	out := map[string][]ownerRef{}
	for nn, containers := range kv.pods {
		for name, devs := range containers {
			out[devs] = append(out[devs], ownerRef{pod: nn, container: name})
		}
	}
	return out
}

// ownerRef is a container as the kubelet names it.
type ownerRef struct {
	pod       types.NamespacedName
	container string
}
