package testing

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gpushare/gpushare/pkg/contract"
)

// Cluster returns the fixed cluster of the golden tests:
//   - node-a: two 40-unit A100s (annotation); a single-container pod on card 0 and a
//     two-container pod on card 1;
//   - node-b: a 16-unit T4, an unhealthy 32-unit V100 and a 24-unit A10 (mixed sizes); a pod
//     named with '%' placed by the predecessor's single-GPU annotation on card 2, and a pod bound
//     by hand without placement (pending);
//   - node-c: no annotation, 32 units over 2 cards (even split); a pod split over both cards and a
//     pod whose init container asks more than its app container;
//   - node-cpu: no GPUs, one CPU pod; plus a Succeeded pod and an unscheduled pod that hold
//     nothing.
func Cluster(t testing.TB) []runtime.Object {
	t.Helper()
	return append(Nodes(t), Pods()...)
}

// Nodes returns the fixture's nodes.
func Nodes(t testing.TB) []runtime.Object {
	t.Helper()
	return []runtime.Object{
		MakeNode("node-b").IP(v1.NodeInternalIP, "10.0.0.2").GPUs(t,
			contract.GPU{Index: 0, UUID: "GPU-b0", Model: "Tesla T4", Units: 16, Healthy: true},
			contract.GPU{Index: 1, UUID: "GPU-b1", Model: "Tesla V100-SXM2-32GB", Units: 32, Healthy: false},
			contract.GPU{Index: 2, UUID: "GPU-b2", Model: "NVIDIA A10", Units: 24, Healthy: true}).Obj(),
		MakeNode("node-a").IP(v1.NodeExternalIP, "203.0.113.1").IP(v1.NodeInternalIP, "10.0.0.1").GPUs(t,
			contract.GPU{Index: 0, UUID: "GPU-a0", Model: "NVIDIA A100-SXM4-40GB", Units: 40, Healthy: true},
			contract.GPU{Index: 1, UUID: "GPU-a1", Model: "NVIDIA A100-SXM4-40GB", Units: 40, Healthy: true}).Obj(),
		MakeNode("node-c").IP(v1.NodeInternalIP, "10.0.0.3").Resources(32, 2).Obj(),
		MakeNode("node-cpu").IP(v1.NodeInternalIP, "10.0.0.9").Obj(),
	}
}

// Pods returns the fixture's pods.
func Pods() []runtime.Object {
	return []runtime.Object{
		MakePod("default", "train-1").Node("node-a").Container(8).
			Annotation(contract.AnnotationAllocation, `{"0":{"0":8}}`).Obj(),
		MakePod("team-a", "multi").Node("node-a").Container(4).Container(6).Container(0).
			Annotation(contract.AnnotationAllocation, `{"0":{"1":4},"1":{"1":6}}`).Obj(),
		MakePod("default", "util-100%s%d%%").Node("node-b").Container(5).
			Annotation(contract.AnnotationIndex, "2").Obj(),
		MakePod("team-a", "hand-placed").Node("node-b").Container(3).Obj(),
		MakePod("default", "split").Node("node-c").Container(8).
			Annotation(contract.DefaultGPUsPerContainer, "2").
			Annotation(contract.AnnotationAllocation, `{"0":{"0":4,"1":4}}`).Obj(),
		MakePod("team-a", "init-heavy").Node("node-c").InitContainer(6).Container(2).
			Annotation(contract.AnnotationAllocation, `{"init-0":{"1":6},"0":{"1":2}}`).Obj(),
		MakePod("default", "done").Node("node-a").Container(10).Phase(v1.PodSucceeded).
			Annotation(contract.AnnotationAllocation, `{"0":{"0":10}}`).Obj(),
		MakePod("default", "unscheduled").Container(4).Phase(v1.PodPending).Obj(),
		MakePod("kube-system", "cpu-only").Node("node-cpu").Container(0).Obj(),
	}
}
