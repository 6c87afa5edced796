// Package fake holds test doubles of the device plugin's sources: a PodSource reading a
// clientset directly and a kubelet that records which containers got which devices.
package fake

import (
	"context"
	"fmt"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// ClientPods is a PodSource that lists the pods of Node from Client on every call, so that tests
// see their own writes at once (no informer lag).
type ClientPods struct {
	Client kubernetes.Interface
	Node   string
}

// NodePods lists the pods bound to Node.
func (c ClientPods) NodePods(ctx context.Context) ([]*v1.Pod, error) {
	list, err := c.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	var out []*v1.Pod
	for i := range list.Items {
		if list.Items[i].Spec.NodeName == c.Node {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// Kubelet plays the kubelet's side of PodResources: AddPod when the kubelet receives a pod,
// SetDevices after its Allocate. Safe for concurrent use.
type Kubelet struct {
	mu   sync.Mutex // guards pods
	pods []*podresourcesv1.PodResources
}

// AddPod makes the kubelet hold pod (as its pod manager does before admitting it).
func (k *Kubelet) AddPod(pod *v1.Pod) {
	k.mu.Lock()
	defer k.mu.Unlock()
	pr := &podresourcesv1.PodResources{Name: pod.Name, Namespace: pod.Namespace}
	for _, c := range pod.Spec.Containers {
		pr.Containers = append(pr.Containers, &podresourcesv1.ContainerResources{Name: c.Name})
	}
	k.pods = append(k.pods, pr)
}

// SetDevices records that container of pod got ids of resource.
func (k *Kubelet) SetDevices(pod *v1.Pod, container, resource string, ids []string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, pr := range k.pods {
		if pr.Name != pod.Name || pr.Namespace != pod.Namespace {
			continue
		}
		for _, c := range pr.Containers {
			if c.Name == container {
				c.Devices = append(c.Devices, &podresourcesv1.ContainerDevices{ResourceName: resource, DeviceIds: slices.Clone(ids)})
			}
		}
	}
}

// List returns a copy of the kubelet's pods.
func (k *Kubelet) List(context.Context) ([]*podresourcesv1.PodResources, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]*podresourcesv1.PodResources, len(k.pods))
	for i, pr := range k.pods {
		cp := &podresourcesv1.PodResources{Name: pr.Name, Namespace: pr.Namespace}
		for _, c := range pr.Containers {
			cc := &podresourcesv1.ContainerResources{Name: c.Name}
			for _, d := range c.Devices {
				cc.Devices = append(cc.Devices, &podresourcesv1.ContainerDevices{ResourceName: d.ResourceName, DeviceIds: slices.Clone(d.DeviceIds)})
			}
			cp.Containers = append(cp.Containers, cc)
		}
		out[i] = cp
	}
	return out, nil
}
