// Package testing builds Pods and Nodes for tests of the cache, the scheduler and the tools
// built on them, in the style of kube-scheduler's testing wrappers:
//
//	MakePod().Name("p").GPUMem(4).Node("n1").Obj()
//	MakeNode("n1").GPUs(16, 16).Obj()
package testing

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/contract"
)

// PodWrapper builds a Pod.
type PodWrapper struct{ v1.Pod }

// MakePod starts a pod "p" in namespace "default" with UID "uid-p" and no containers.
func MakePod() *PodWrapper {
	return &PodWrapper{v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p", Annotations: map[string]string{}}}}
}

// Name sets the name and the UID "uid-<name>".
func (p *PodWrapper) Name(n string) *PodWrapper {
	p.ObjectMeta.Name, p.ObjectMeta.UID = n, types.UID("uid-"+n)
	return p
}

// Namespace sets the namespace.
func (p *PodWrapper) Namespace(ns string) *PodWrapper { p.ObjectMeta.Namespace = ns; return p }

// UID sets the UID.
func (p *PodWrapper) UID(uid string) *PodWrapper { p.ObjectMeta.UID = types.UID(uid); return p }

// GPUMem adds an app container asking units of the default gpu-mem resource.
func (p *PodWrapper) GPUMem(units int64) *PodWrapper {
	p.Spec.Containers = append(p.Spec.Containers, container("c"+strconv.Itoa(len(p.Spec.Containers)), units))
	return p
}

// InitGPUMem adds an init container asking units of gpu-mem.
func (p *PodWrapper) InitGPUMem(units int64) *PodWrapper {
	p.Spec.InitContainers = append(p.Spec.InitContainers, container("init"+strconv.Itoa(len(p.Spec.InitContainers)), units))
	return p
}

// NamedGPUMem adds an app container with the given name asking units of gpu-mem (none when
// units is 0): for tests where container names matter, as they do to the kubelet.
func (p *PodWrapper) NamedGPUMem(name string, units int64) *PodWrapper {
	p.Spec.Containers = append(p.Spec.Containers, container(name, units))
	return p
}

// NamedInitGPUMem adds an init container with the given name asking units of gpu-mem.
func (p *PodWrapper) NamedInitGPUMem(name string, units int64) *PodWrapper {
	p.Spec.InitContainers = append(p.Spec.InitContainers, container(name, units))
	return p
}

// Container adds an app container asking no gpu-mem.
func (p *PodWrapper) Container() *PodWrapper { return p.GPUMem(0) }

// CPU sets the CPU (milli) and memory (bytes) requests of the last app container.
func (p *PodWrapper) CPU(milli, memBytes int64) *PodWrapper {
	c := &p.Spec.Containers[len(p.Spec.Containers)-1]
	if c.Resources.Requests == nil {
		c.Resources.Requests = v1.ResourceList{}
	}
	c.Resources.Requests[v1.ResourceCPU] = *resource.NewMilliQuantity(milli, resource.DecimalSI)
	c.Resources.Requests[v1.ResourceMemory] = *resource.NewQuantity(memBytes, resource.BinarySI)
	return p
}

// NodeSelector sets spec.nodeSelector to k=v.
func (p *PodWrapper) NodeSelector(k, v string) *PodWrapper {
	p.Spec.NodeSelector = map[string]string{k: v}
	return p
}

// Tolerate adds a toleration of key=value with effect.
func (p *PodWrapper) Tolerate(k, v string, effect v1.TaintEffect) *PodWrapper {
	p.Spec.Tolerations = append(p.Spec.Tolerations, v1.Toleration{Key: k, Operator: v1.TolerationOpEqual, Value: v, Effect: effect})
	return p
}

// Node binds the pod to a node.
func (p *PodWrapper) Node(n string) *PodWrapper { p.Spec.NodeName = n; return p }

// Annotation sets an annotation.
func (p *PodWrapper) Annotation(k, v string) *PodWrapper { p.Annotations[k] = v; return p }

// Placement sets the placement annotation from a JSON allocation such as {"0":{"1":4}}.
func (p *PodWrapper) Placement(allocJSON string) *PodWrapper {
	return p.Annotation(contract.AnnotationAllocation, allocJSON)
}

// Allocation writes the extender's annotations for alloc (container key → GPU index → units)
// as a bind leaves them: the placement, the first GPU's index and assigned=false.
func (p *PodWrapper) Allocation(alloc contract.Allocation) *PodWrapper {
	raw, err := json.Marshal(alloc)
	if err != nil {
		panic(fmt.Sprintf("allocation %v: %v", alloc, err))
	}
	p.Annotations[contract.AnnotationAllocation] = string(raw)
	p.Annotations[contract.AnnotationIndex] = strconv.Itoa(alloc.GPUs()[0])
	p.Annotations[contract.AnnotationAssigned] = "false"
	return p
}

// Created sets the creation time.
func (p *PodWrapper) Created(t time.Time) *PodWrapper {
	p.CreationTimestamp = metav1.NewTime(t)
	return p
}

// Phase sets the pod's phase.
func (p *PodWrapper) Phase(ph v1.PodPhase) *PodWrapper { p.Status.Phase = ph; return p }

// Terminating sets a deletion timestamp.
func (p *PodWrapper) Terminating() *PodWrapper {
	now := metav1.Now()
	p.DeletionTimestamp = &now
	return p
}

// Obj returns the pod.
func (p *PodWrapper) Obj() *v1.Pod { return p.Pod.DeepCopy() }

func container(name string, units int64) v1.Container {
	c := v1.Container{Name: name, Image: "busybox"}
	if units != 0 {
		q := *resource.NewQuantity(units, resource.DecimalSI)
		c.Resources.Limits = v1.ResourceList{contract.DefaultResourceName: q}
	}
	return c
}

// NodeWrapper builds a Node.
type NodeWrapper struct {
	v1.Node
	gpus []contract.GPU
}

// MakeNode starts a node with 64 CPUs and 256 GiB of memory and no GPUs.
func MakeNode(name string) *NodeWrapper {
	n := &NodeWrapper{Node: v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{}}}}
	n.Status.Allocatable = v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("64"),
		v1.ResourceMemory: resource.MustParse("256Gi"),
	}
	n.Status.Capacity = n.Status.Allocatable.DeepCopy()
	return n
}

// GPUs gives the node healthy "Tesla T4" cards of the given sizes, published as the device
// plugin publishes them (annotation, gpu-mem and gpu-count).
func (n *NodeWrapper) GPUs(units ...int64) *NodeWrapper {
	n.gpus = nil
	for i, u := range units {
		n.gpus = append(n.gpus, contract.GPU{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", n.Name, i), Model: "Tesla T4", Units: u, Healthy: true})
	}
	return n
}

// Model sets card i's model.
func (n *NodeWrapper) Model(i int, model string) *NodeWrapper { n.gpus[i].Model = model; return n }

// Label sets a node label.
func (n *NodeWrapper) Label(k, v string) *NodeWrapper {
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[k] = v
	return n
}

// Taint adds a taint key=value with effect.
func (n *NodeWrapper) Taint(k, v string, effect v1.TaintEffect) *NodeWrapper {
	n.Spec.Taints = append(n.Spec.Taints, v1.Taint{Key: k, Value: v, Effect: effect})
	return n
}

// MemoryLimit sets every card's memory limit mode, as the device plugin publishes it.
func (n *NodeWrapper) MemoryLimit(mode string) *NodeWrapper {
	for i := range n.gpus {
		n.gpus[i].MemoryLimit = mode
	}
	return n
}

// Unhealthy marks card i unhealthy.
func (n *NodeWrapper) Unhealthy(i int) *NodeWrapper { n.gpus[i].Healthy = false; return n }

// EvenSplit publishes only gpu-mem and gpu-count, as the predecessor's plugin did.
func (n *NodeWrapper) EvenSplit(total, count int64) *NodeWrapper {
	n.gpus = nil
	n.setResources(total, count)
	return n
}

// Obj returns the node.
func (n *NodeWrapper) Obj() *v1.Node {
	if n.gpus != nil {
		var total int64
		for _, g := range n.gpus {
			if g.Healthy {
				total += g.Units
			}
		}
		n.setResources(total, int64(len(n.gpus)))
		raw, err := contract.EncodeGPUs(n.gpus)
		if err != nil {
			panic(err) // cannot happen for this plain struct
		}
		n.Annotations[contract.DefaultNodeGPUsKey] = raw
	}
	return n.Node.DeepCopy()
}

func (n *NodeWrapper) setResources(total, count int64) {
	for _, l := range []v1.ResourceList{n.Status.Allocatable, n.Status.Capacity} {
		l[contract.DefaultResourceName] = *resource.NewQuantity(total, resource.DecimalSI)
		l[contract.DefaultCountName] = *resource.NewQuantity(count, resource.DecimalSI)
	}
}
