package sim

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// namespace is the namespace of the simulated pods.
const namespace = "openb"

// NodeObject is the Kubernetes node the extender would see for n: allocatable CPU and memory,
// and the device plugin's GPU inventory annotation with MilliPerGPU units per card, and n's
// links, when it has them, with each card's NUMA node (its socket, as SyntheticLinks places it).
func NodeObject(n *Node, names *contract.Names) (*v1.Node, error) {
	gpus := make([]contract.GPU, n.GPUs)
	for i := range gpus {
		gpus[i] = contract.GPU{Index: i, UUID: n.Name + "-gpu" + strconv.Itoa(i), Model: n.Model, Units: MilliPerGPU, Healthy: true}
		if len(n.Links) == n.GPUs {
			numa := socketOf(i, n.GPUs)
			gpus[i].Links, gpus[i].TopologyVersion, gpus[i].NUMA = contract.EncodeLinks(n.Links, i), contract.TopologyVersion, &numa
		}
	}
	ann, err := contract.EncodeGPUs(gpus)
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Annotations: map[string]string{names.NodeGPUsAnnotation: ann}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU:    *resource.NewMilliQuantity(n.MilliCPU, resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(n.MemoryMiB<<20, resource.BinarySI),
		}},
	}, nil
}

// PodObject is the Kubernetes pod for the seq-th submission of p: one container requesting its
// CPU and memory, its gpu-mem units and, for several cards, the gpu-count annotation.
func PodObject(p *Pod, seq int, names *contract.Names) *v1.Pod {
	name := p.Name + "-" + strconv.Itoa(seq)
	c := v1.Container{Name: "main", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(p.MilliCPU, resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(p.MemoryMiB<<20, resource.BinarySI),
	}}}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(name)},
		Spec: v1.PodSpec{Containers: []v1.Container{c}}}
	if p.NumGPU == 0 {
		return pod
	}
	units := *resource.NewQuantity(p.GPURequest(), resource.DecimalSI)
	c.Resources.Limits = v1.ResourceList{names.Resource: units}
	pod.Spec.Containers[0] = c
	pod.Annotations = map[string]string{names.GPUCountAnnotation: strconv.FormatInt(p.NumGPU, 10)}
	if len(p.Models) > 0 {
		pod.Annotations[names.ModelAnnotation] = joinModels(p.Models)
	}
	return pod
}

func joinModels(models []string) string {
	out := ""
	for i, m := range models {
		if i > 0 {
			out += "|"
		}
		out += m
	}
	return out
}

// newCluster loads nodes into a fresh production cache; with hideLinks, their annotations leave
// their links out.
func newCluster(nodes []Node, names *contract.Names, c cache.Cache, hideLinks bool) error {
	for i := range nodes {
		n := &nodes[i]
		if hideLinks && n.Links != nil {
			bare := *n
			bare.Links = nil
			n = &bare
		}
		obj, err := NodeObject(n, names)
		if err != nil {
			return err
		}
		c.SetNode(obj)
	}
	return nil
}

// podRequest is the pod's gpu-mem request and CPU/memory, parsed by the contract as the
// extender parses it.
func podRequest(pod *v1.Pod, names *contract.Names) (contract.PodRequest, placement.PodResources, error) {
	req, err := contract.ParseRequest(pod, names)
	if err != nil {
		return req, placement.PodResources{}, fmt.Errorf("pod %s: %w", pod.Name, err)
	}
	cpu, mem := contract.PodCPUMemory(pod)
	return req, placement.PodResources{MilliCPU: cpu, Memory: mem}, nil
}
