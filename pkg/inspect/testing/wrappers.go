// Package testing has builders for nodes and pods of GPU-sharing clusters, and the fixed cluster
// the inspect golden tests print.
package testing

import (
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/contract"
)

// NodeWrapper builds a Node.
type NodeWrapper struct{ v1.Node }

// MakeNode starts a node with the given name.
func MakeNode(name string) *NodeWrapper {
	return &NodeWrapper{v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}}
}

// IP adds an address of the given type.
func (w *NodeWrapper) IP(t v1.NodeAddressType, addr string) *NodeWrapper {
	w.Status.Addresses = append(w.Status.Addresses, v1.NodeAddress{Type: t, Address: addr})
	return w
}

// GPUs sets the device plugin's inventory annotation and the gpu-mem and gpu-count resources
// (healthy cards only, as the plugin registers them).
func (w *NodeWrapper) GPUs(t testing.TB, gpus ...contract.GPU) *NodeWrapper {
	t.Helper()
	raw, err := contract.EncodeGPUs(gpus)
	if err != nil {
		t.Fatalf("encode GPUs of node %s: %v", w.Name, err)
	}
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[contract.DefaultNodeGPUsKey] = raw
	var units int64
	for _, g := range gpus {
		if g.Healthy {
			units += g.Units
		}
	}
	return w.Resources(units, int64(len(gpus)))
}

// Resources sets allocatable and capacity gpu-mem units and gpu-count.
func (w *NodeWrapper) Resources(units, count int64) *NodeWrapper {
	rl := v1.ResourceList{
		contract.DefaultResourceName: *resource.NewQuantity(units, resource.DecimalSI),
		contract.DefaultCountName:    *resource.NewQuantity(count, resource.DecimalSI),
	}
	w.Status.Allocatable, w.Status.Capacity = rl, rl.DeepCopy()
	return w
}

// Obj returns the node.
func (w *NodeWrapper) Obj() *v1.Node { return &w.Node }

// PodWrapper builds a Pod.
type PodWrapper struct{ v1.Pod }

// MakePod starts a running pod in namespace ns.
func MakePod(ns, name string) *PodWrapper {
	return &PodWrapper{v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + ns + "-" + name)},
		Status:     v1.PodStatus{Phase: v1.PodRunning},
	}}
}

// Node binds the pod to a node.
func (w *PodWrapper) Node(name string) *PodWrapper {
	w.Spec.NodeName = name
	return w
}

// Phase sets the pod's phase.
func (w *PodWrapper) Phase(p v1.PodPhase) *PodWrapper {
	w.Status.Phase = p
	return w
}

// Container adds an app container asking units of gpu-mem (none when units is 0).
func (w *PodWrapper) Container(units int64) *PodWrapper {
	w.Spec.Containers = append(w.Spec.Containers, container("c"+strconv.Itoa(len(w.Spec.Containers)), units))
	return w
}

// InitContainer adds an init container asking units of gpu-mem.
func (w *PodWrapper) InitContainer(units int64) *PodWrapper {
	w.Spec.InitContainers = append(w.Spec.InitContainers, container("init"+strconv.Itoa(len(w.Spec.InitContainers)), units))
	return w
}

// Annotation sets a pod annotation.
func (w *PodWrapper) Annotation(k, v string) *PodWrapper {
	if w.Annotations == nil {
		w.Annotations = map[string]string{}
	}
	w.Annotations[k] = v
	return w
}

// Obj returns the pod.
func (w *PodWrapper) Obj() *v1.Pod { return &w.Pod }

func container(name string, units int64) v1.Container {
	c := v1.Container{Name: name, Image: "img"}
	if units > 0 {
		c.Resources.Limits = v1.ResourceList{contract.DefaultResourceName: *resource.NewQuantity(units, resource.DecimalSI)}
	}
	return c
}
