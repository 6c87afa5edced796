// Package testing holds the fixed GPU-sharing cluster the inspect golden tests print, built with
// the shared builders of pkg/cache/testing.
package testing

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	ct "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
)

// Cluster returns the fixed cluster of the golden tests:
//   - node-a: two 40-unit A100s (annotation) whose containers are held to their ask by
//     HAMi-core; a single-container pod on card 0 and a two-container pod on card 1;
//   - node-b: a 16-unit T4, an unhealthy 32-unit V100 and a 24-unit A10 (mixed sizes), asked to
//     enforce limits without the library to do it (memory limit "unavailable"); a pod
//     named with '%' placed by the predecessor's single-GPU annotation on card 2, and a pod bound
//     by hand without placement (pending);
//   - node-c: no annotation, 32 units over 2 cards (even split); a pod split over both cards and a
//     pod whose init container asks more than its app container;
//   - node-cpu: no GPUs, one CPU pod; plus a Succeeded pod and an unscheduled pod that hold
//     nothing.
func Cluster() []runtime.Object {
	return append(Nodes(), Pods()...)
}

// Nodes returns the fixture's nodes, not sorted by name.
func Nodes() []runtime.Object {
	return []runtime.Object{
		withIPs(ct.MakeNode("node-b").GPUs(16, 32, 24).Model(1, "Tesla V100-SXM2-32GB").Unhealthy(1).
			Model(2, "NVIDIA A10").MemoryLimit(contract.MemoryLimitUnavailable).Obj(), "10.0.0.2"),
		withIPs(ct.MakeNode("node-a").GPUs(40, 40).Model(0, "NVIDIA A100-SXM4-40GB").
			Model(1, "NVIDIA A100-SXM4-40GB").MemoryLimit(contract.MemoryLimitHAMiCore).Obj(), "10.0.0.1", "203.0.113.1"),
		withIPs(ct.MakeNode("node-c").EvenSplit(32, 2).Obj(), "10.0.0.3"),
		withIPs(ct.MakeNode("node-cpu").Obj(), "10.0.0.9"),
	}
}

// withIPs gives a node an ExternalIP (when external is given) listed before its InternalIP.
func withIPs(n *v1.Node, internal string, external ...string) *v1.Node {
	for _, e := range external {
		n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeExternalIP, Address: e})
	}
	n.Status.Addresses = append(n.Status.Addresses, v1.NodeAddress{Type: v1.NodeInternalIP, Address: internal})
	return n
}

// Pods returns the fixture's pods.
func Pods() []runtime.Object {
	return []runtime.Object{
		running(ct.MakePod().Name("train-1").Node("node-a").GPUMem(8).Placement(`{"0":{"0":8}}`)),
		running(ct.MakePod().Namespace("team-a").Name("multi").Node("node-a").GPUMem(4).GPUMem(6).Container().
			Placement(`{"0":{"1":4},"1":{"1":6}}`)),
		running(ct.MakePod().Name("util-100%s%d%%").Node("node-b").GPUMem(5).Annotation(contract.AnnotationIndex, "2")),
		running(ct.MakePod().Namespace("team-a").Name("hand-placed").Node("node-b").GPUMem(3)),
		running(ct.MakePod().Name("split").Node("node-c").GPUMem(8).
			Annotation(contract.DefaultGPUsPerContainer, "2").Placement(`{"0":{"0":4,"1":4}}`)),
		running(ct.MakePod().Namespace("team-a").Name("init-heavy").Node("node-c").InitGPUMem(6).GPUMem(2).
			Placement(`{"init-0":{"1":6},"0":{"1":2}}`)),
		ct.MakePod().Name("done").Node("node-a").GPUMem(10).Phase(v1.PodSucceeded).Placement(`{"0":{"0":10}}`).Obj(),
		ct.MakePod().Name("unscheduled").GPUMem(4).Phase(v1.PodPending).Obj(),
		running(ct.MakePod().Namespace("kube-system").Name("cpu-only").Node("node-cpu").Container()),
	}
}

func running(p *ct.PodWrapper) *v1.Pod { return p.Phase(v1.PodRunning).Obj() }

// TopologyCluster returns a cluster whose node publishes its cards' topology:
//   - node-nv: four 40-unit A100s, NVLink pairs (0,1) and (2,3) on NUMA nodes 0 and 1, joined
//     across sockets (SYS); a pod on the NVLinked pair, a pod over three cards (one NVLinked
//     pair and a card across sockets), and a one-card pod.
func TopologyCluster() []runtime.Object {
	node := withIPs(ct.MakeNode("node-nv").GPUs(40, 40, 40, 40).Obj(), "10.0.0.4")
	// the inventory as a share-plugin that reads the topology publishes it
	node.Annotations[contract.DefaultNodeGPUsKey] = `[` +
		`{"index":0,"uuid":"GPU-node-nv-0","model":"NVIDIA A100-SXM4-40GB","units":40,"healthy":true,"memoryLimit":"hami-core","numa":0,"links":"X NV4 SYS SYS","topologyVersion":1},` +
		`{"index":1,"uuid":"GPU-node-nv-1","model":"NVIDIA A100-SXM4-40GB","units":40,"healthy":true,"memoryLimit":"hami-core","numa":0,"links":"NV4 X SYS SYS","topologyVersion":1},` +
		`{"index":2,"uuid":"GPU-node-nv-2","model":"NVIDIA A100-SXM4-40GB","units":40,"healthy":true,"memoryLimit":"hami-core","numa":1,"links":"SYS SYS X NV4","topologyVersion":1},` +
		`{"index":3,"uuid":"GPU-node-nv-3","model":"NVIDIA A100-SXM4-40GB","units":40,"healthy":true,"memoryLimit":"hami-core","numa":1,"links":"SYS SYS NV4 X","topologyVersion":1}]`
	return []runtime.Object{
		node,
		running(ct.MakePod().Name("tp-pair").Node("node-nv").GPUMem(8).
			Annotation(contract.DefaultGPUsPerContainer, "2").Placement(`{"0":{"0":4,"1":4}}`)),
		running(ct.MakePod().Namespace("team-a").Name("tp-three").Node("node-nv").GPUMem(6).
			Annotation(contract.DefaultGPUsPerContainer, "3").Placement(`{"0":{"1":2,"2":2,"3":2}}`)),
		running(ct.MakePod().Name("single").Node("node-nv").GPUMem(5).Placement(`{"0":{"2":5}}`)),
	}
}

// CapacityCluster returns a cluster whose node publishes each card's memory as the share-plugin
// sizes it:
//   - node-t4: two Tesla T4s of 15 GiB of which the driver reserves 450 MiB, so 14 units each;
//     card 1 unhealthy (a critical XID). A pod on each card.
func CapacityCluster() []runtime.Object {
	node := withIPs(ct.MakeNode("node-t4").GPUs(14, 14).Model(0, "Tesla T4").Model(1, "Tesla T4").Unhealthy(1).Obj(), "10.0.0.5")
	// the inventory as a share-plugin that reads the driver's reserve publishes it
	node.Annotations[contract.DefaultNodeGPUsKey] = `[` +
		`{"index":0,"uuid":"GPU-node-t4-0","model":"Tesla T4","units":14,"memoryBytes":16106127360,"reservedBytes":471859200,"usableBytes":15634268160,"healthy":true,"memoryLimit":"hami-core"},` +
		`{"index":1,"uuid":"GPU-node-t4-1","model":"Tesla T4","units":14,"memoryBytes":16106127360,"reservedBytes":471859200,"usableBytes":15634268160,"healthy":false,"memoryLimit":"hami-core"}]`
	return []runtime.Object{
		node,
		running(ct.MakePod().Name("serve-a").Node("node-t4").GPUMem(6).Placement(`{"0":{"0":6}}`)),
		running(ct.MakePod().Name("serve-b").Node("node-t4").GPUMem(4).Placement(`{"0":{"1":4}}`)),
	}
}
