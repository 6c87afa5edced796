package feed_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/cache/feed"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
)

func TestTrimObjectKeepsWhatPlacementReads(t *testing.T) {
	full := st.MakePod().Name("p").GPUMem(4).InitGPUMem(2).CPU(2000, 4<<30).Node("n1").
		Placement(`{"0":{"0":4},"init-0":{"0":2}}`).NodeSelector("zone", "a").Tolerate("gpu", "shared", v1.TaintEffectNoSchedule).Obj()
	full.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	full.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")}
	full.Spec.Volumes = []v1.Volume{{Name: "data"}}
	full.Spec.Containers[0].Env = []v1.EnvVar{{Name: "A", Value: "b"}}
	full.Spec.Containers[0].Command = []string{"sleep", "infinity"}
	full.Status.Phase = v1.PodRunning
	full.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}
	full.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "c0", Ready: true}}

	full.Spec.NodeName = "" // pending: Bind still reads its selectors and tolerations
	trim := feed.Trimmer(contract.DefaultNames())
	trimmed, err := trim(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	pod := trimmed.(*v1.Pod)
	if pod.ManagedFields != nil || pod.Spec.Volumes != nil || pod.Spec.Containers[0].Env != nil ||
		pod.Spec.Containers[0].Command != nil || pod.Status.ContainerStatuses != nil {
		t.Errorf("not trimmed: managedFields %v, volumes %v, env %v, command %v, statuses %v", pod.ManagedFields,
			pod.Spec.Volumes, pod.Spec.Containers[0].Env, pod.Spec.Containers[0].Command, pod.Status.ContainerStatuses)
	}
	// What the cache, the planner and Bind read is unchanged.
	names := contract.DefaultNames()
	sameCharge(t, full, pod, &names)
	keep := func(p *v1.Pod) any {
		return []any{p.ObjectMeta.Annotations, p.UID, p.Spec.NodeName, p.Spec.NodeSelector, p.Spec.Affinity, p.Spec.Tolerations,
			p.Spec.Overhead, p.Spec.SchedulerName, p.Status.Phase, p.Status.Conditions, p.Spec.Containers[0].Resources, p.Spec.InitContainers[0].Resources}
	}
	if diff := cmp.Diff(keep(full), keep(pod)); diff != "" {
		t.Errorf("scheduling fields (-full,+trimmed):\n%s", diff)
	}

	node := st.MakeNode("n1").GPUs(16).Label("zone", "a").Taint("gpu", "shared", v1.TaintEffectNoSchedule).Obj()
	node.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}
	node.Status.Images = []v1.ContainerImage{{Names: []string{"busybox"}, SizeBytes: 1 << 20}}
	node.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"}}
	node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}
	node.Status.NodeInfo = v1.NodeSystemInfo{KernelVersion: "6.1.0", ContainerRuntimeVersion: "containerd://2.0.0"}
	trimmedNode, err := trim(node.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	n := trimmedNode.(*v1.Node)
	if n.ManagedFields != nil || !reflect.DeepEqual(n.Status, v1.NodeStatus{Capacity: node.Status.Capacity, Allocatable: node.Status.Allocatable}) {
		t.Errorf("node not trimmed: managedFields %v, status %+v", n.ManagedFields, n.Status)
	}
	if diff := cmp.Diff([]any{node.Name, node.UID, node.Labels, node.Annotations, node.Spec, node.Status.Capacity, node.Status.Allocatable},
		[]any{n.Name, n.UID, n.Labels, n.Annotations, n.Spec, n.Status.Capacity, n.Status.Allocatable}); diff != "" {
		t.Errorf("node fields (-full,+trimmed):\n%s", diff)
	}
}

// TestTrimmerBoundPod: a bound pod keeps what the cache charges it by (its request, CPU and
// memory, placement, phase) and the contract's annotations, and loses what only Bind of a
// pending pod reads and every other annotation; requests equal to limits share their map.
func TestTrimmerBoundPod(t *testing.T) {
	names := contract.DefaultNames()
	full := st.MakePod().Name("p").GPUMem(4).CPU(2000, 4<<30).Node("n1").Placement(`{"0":{"0":4}}`).
		Annotation(names.ModelAnnotation, "T4").Annotation(names.GPUCountAnnotation, "1").
		Annotation("kubectl.kubernetes.io/last-applied-configuration", strings.Repeat("x", 4096)).
		NodeSelector("zone", "a").Tolerate("gpu", "shared", v1.TaintEffectNoSchedule).Obj()
	full.Spec.Containers[0].Resources.Requests = full.Spec.Containers[0].Resources.Limits.DeepCopy()
	full.Status.Phase = v1.PodRunning
	full.Status.Conditions = []v1.PodCondition{{Type: v1.PodScheduled, Status: v1.ConditionTrue}}

	trimmed, err := feed.Trimmer(names)(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	pod := trimmed.(*v1.Pod)
	wantAnn := map[string]string{}
	for k, v := range full.Annotations {
		if k != "kubectl.kubernetes.io/last-applied-configuration" {
			wantAnn[k] = v
		}
	}
	if diff := cmp.Diff(wantAnn, pod.Annotations); diff != "" {
		t.Errorf("annotations (-want,+got):\n%s", diff)
	}
	if pod.Spec.NodeSelector != nil || pod.Spec.Tolerations != nil || pod.Status.Conditions != nil {
		t.Errorf("bound pod kept selector %v, tolerations %v, conditions %v", pod.Spec.NodeSelector, pod.Spec.Tolerations, pod.Status.Conditions)
	}
	wantReq, gotReq := sameCharge(t, full, pod, &names)
	wantAlloc, _, err := contract.AllocationFromPod(full, &wantReq)
	if err != nil {
		t.Fatal(err)
	}
	gotAlloc, _, err := contract.AllocationFromPod(pod, &gotReq)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantAlloc, gotAlloc); diff != "" {
		t.Errorf("placement (-full,+trimmed):\n%s", diff)
	}
	if pod.Status.Phase != v1.PodRunning || pod.Spec.NodeName != "n1" || pod.UID != full.UID {
		t.Errorf("identity or phase lost: %s %s %s", pod.UID, pod.Spec.NodeName, pod.Status.Phase)
	}
	r := pod.Spec.Containers[0].Resources
	if reflect.ValueOf(r.Requests).UnsafePointer() != reflect.ValueOf(r.Limits).UnsafePointer() {
		t.Error("requests equal to limits still have a map of their own")
	}
}

// sameCharge fails t unless the trimmed pod asks the same GPU memory, CPU and memory as full;
// it returns both requests.
func sameCharge(t *testing.T, full, trimmed *v1.Pod, names *contract.Names) (want, got contract.PodRequest) {
	t.Helper()
	want, err := contract.ParseRequest(full, names)
	if err != nil {
		t.Fatal(err)
	}
	got, err = contract.ParseRequest(trimmed, names)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request (-full,+trimmed):\n%s", diff)
	}
	fullCPU, fullMem := contract.PodCPUMemory(full)
	trimmedCPU, trimmedMem := contract.PodCPUMemory(trimmed)
	if diff := cmp.Diff([2]int64{fullCPU, fullMem}, [2]int64{trimmedCPU, trimmedMem}); diff != "" {
		t.Errorf("CPU and memory (-full,+trimmed):\n%s", diff)
	}
	return want, got
}
