package e2e

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// TestNamespaceQuotaOnGPUMem: a native ResourceQuota on requests.aliyun.com/gpu-mem caps what a
// namespace's pods may ask (the API server defaults a container's requests to its limits, so
// pod specs that give only limits count). The quota's admission refuses the pod that would go
// over, before any scheduling; the pods within it are scheduled as usual, and deleting one
// frees its share of the quota.
func TestNamespaceQuotaOnGPUMem(t *testing.T) {
	e := newEnv(t)
	cards := map[string][]contract.GPU{"gpu-a": framework.Cards("gpu-a", "Tesla T4", 16, 2)}
	e.nodes(cards)
	const ns = "team-a"
	if err := e.c.EnsureNamespace(e.ctx, ns); err != nil {
		t.Fatal(err)
	}
	quota := &v1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu-mem", Namespace: ns},
		Spec: v1.ResourceQuotaSpec{Hard: v1.ResourceList{
			v1.ResourceName("requests." + contract.DefaultResourceName): resource.MustParse("10"),
		}},
	}
	if _, err := e.c.Client.CoreV1().ResourceQuotas(ns).Create(e.ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Quota admission refuses every pod until the resource quota controller has computed the
	// quota's status.
	if err := poll(e.ctx, time.Minute, func() (bool, error) {
		q, err := e.c.Client.CoreV1().ResourceQuotas(ns).Get(e.ctx, quota.Name, metav1.GetOptions{})
		return err == nil && len(q.Status.Hard) > 0, err
	}); err != nil {
		t.Fatalf("quota status never computed: %v", err)
	}

	pod := func(name string, units int64) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: gpuPodSpec(e.c.SchedulerName, units)}
	}
	create := func(p *v1.Pod) error {
		_, err := e.c.Client.CoreV1().Pods(ns).Create(e.ctx, p, metav1.CreateOptions{})
		return err
	}
	bound := func(name string) string {
		t.Helper()
		var node string
		if err := poll(e.ctx, time.Minute, func() (bool, error) {
			p, err := e.c.Client.CoreV1().Pods(ns).Get(e.ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			node = p.Spec.NodeName
			return node != "", nil
		}); err != nil {
			t.Fatalf("pod %s/%s not bound: %v", ns, name, err)
		}
		return node
	}

	if err := create(pod("six", 6)); err != nil {
		t.Fatalf("6 of a 10-unit quota refused: %v", err)
	}
	if node := bound("six"); node != "gpu-a" {
		t.Fatalf("pod six on %q, want gpu-a", node)
	}
	err := create(pod("five", 5))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "exceeded quota") {
		t.Fatalf("6 + 5 units on a 10-unit quota: err = %v, want Forbidden: exceeded quota", err)
	}
	t.Logf("refused as expected: %v", err)
	if err := create(pod("four", 4)); err != nil {
		t.Fatalf("6 + 4 units on a 10-unit quota refused: %v", err)
	}
	bound("four")

	// Deleting a pod gives its units back to the quota (once the controller has counted it).
	if err := e.c.Client.CoreV1().Pods(ns).Delete(e.ctx, "six", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
		t.Fatal(err)
	}
	if err := poll(e.ctx, time.Minute, func() (bool, error) {
		err := create(pod("five", 5))
		if apierrors.IsForbidden(err) {
			return false, nil
		}
		return err == nil, err
	}); err != nil {
		t.Fatalf("quota never freed the deleted pod's units: %v", err)
	}
	bound("five")
	e.checkConsistent(cards)
}

// TestCoexistsWithNvidiaDevicePlugin: a node whose GPUs NVIDIA's device plugin (or the GPU
// Operator) hands out whole, as nvidia.com/gpu, beside a gpushare node. A pod asking
// nvidia.com/gpu goes to the NVIDIA node through kube-scheduler alone (the extender's filter
// and bind are not called for it; its prioritize, called for every pod, ignores nodes without
// cards) and carries none of gpushare's annotations; a pod asking gpu-mem goes to the gpushare
// node. Neither kind can land on the other's node, and the extender's cache counts only
// gpushare's pods.
func TestCoexistsWithNvidiaDevicePlugin(t *testing.T) {
	e := newEnv(t)
	cards := map[string][]contract.GPU{"share-a": framework.Cards("share-a", "Tesla T4", 16, 2)}
	e.nodes(cards)
	if err := e.c.AddWholeGPUNode(e.ctx, "nvidia-a", 4); err != nil {
		t.Fatal(err)
	}

	whole := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "whole", Namespace: "default"}, Spec: gpuPodSpec(e.c.SchedulerName, 1)}
	whole.Spec.Containers[0].Resources.Limits = v1.ResourceList{framework.NvidiaGPUResource: resource.MustParse("1")}
	e.create(whole)
	e.create(e.gpuPod("shared", 8))
	cpuOnly := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "cpu-only", Namespace: "default"}, Spec: gpuPodSpec(e.c.SchedulerName, 1)}
	cpuOnly.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	e.create(cpuOnly)

	if got := e.waitBound("whole", time.Minute); got.Spec.NodeName != "nvidia-a" {
		t.Errorf("nvidia.com/gpu pod on %q, want nvidia-a", got.Spec.NodeName)
	} else {
		for k := range got.Annotations {
			if strings.HasPrefix(k, "ALIYUN_COM_GPU_MEM") || k == contract.AnnotationAllocation {
				t.Errorf("nvidia.com/gpu pod carries gpushare annotation %s=%s", k, got.Annotations[k])
			}
		}
	}
	if got := e.waitBound("shared", time.Minute); got.Spec.NodeName != "share-a" {
		t.Errorf("gpu-mem pod on %q, want share-a", got.Spec.NodeName)
	} else if got.Annotations[contract.AnnotationIndex] == "" {
		t.Errorf("gpu-mem pod has no %s annotation: %v", contract.AnnotationIndex, got.Annotations)
	}
	// The extender tells which card it chose, in an event kubectl describe shows.
	if err := poll(e.ctx, 30*time.Second, func() (bool, error) {
		return strings.Contains(e.events("shared"), "Normal GPUAssigned: 8 GiB of GPU memory on node share-a: 8 GiB on card"), nil
	}); err != nil {
		t.Errorf("no GPUAssigned event on the gpu-mem pod: %v\nevents:\n%s", err, e.events("shared"))
	}
	e.waitBound("cpu-only", time.Minute)

	// Four whole GPUs on nvidia-a: a fifth whole-GPU pod stays Pending, it never goes to the
	// gpushare node (which has no nvidia.com/gpu).
	for _, name := range []string{"w2", "w3", "w4", "w5"} {
		p := whole.DeepCopy()
		p.Name, p.ResourceVersion = name, ""
		e.create(p)
	}
	for _, name := range []string{"w2", "w3", "w4"} {
		if got := e.waitBound(name, time.Minute); got.Spec.NodeName != "nvidia-a" {
			t.Errorf("pod %s on %q, want nvidia-a", name, got.Spec.NodeName)
		}
	}
	if err := poll(e.ctx, time.Minute, func() (bool, error) {
		p, err := e.c.Client.CoreV1().Pods("default").Get(e.ctx, "w5", metav1.GetOptions{})
		if err != nil || p.Spec.NodeName != "" {
			return false, err
		}
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodScheduled && c.Reason == v1.PodReasonUnschedulable {
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatalf("fifth whole-GPU pod not reported unschedulable: %v\nevents:\n%s", err, e.events("w5"))
	}
	if p, err := e.c.Client.CoreV1().Pods("default").Get(e.ctx, "w5", metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" {
		t.Fatalf("fifth whole-GPU pod: node %q, err %v; want Pending", p.Spec.NodeName, err)
	}
	e.checkConsistent(cards)
}
