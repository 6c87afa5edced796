package main

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
	"github.com/gpushare/gpushare/pkg/placement/policies"
	"github.com/gpushare/gpushare/pkg/sim"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// TestCheckDRA checks the flags --dra refuses, and that with --dra no extender is built.
func TestCheckDRA(t *testing.T) {
	tests := []struct {
		name         string
		edit         func(o *options)
		wantErr      string
		wantExtender string
	}{
		{name: "device-plugin mode untouched", edit: func(o *options) { o.Extender = "bin/ext" }, wantExtender: "bin/ext"},
		{name: "dra builds no extender", edit: func(o *options) { o.dra = true }, wantExtender: draNoExtender},
		{name: "dra with an extender", edit: func(o *options) { o.dra, o.Extender = true, "bin/ext" }, wantErr: "--extender"},
		{name: "dra with tainted GPU nodes", edit: func(o *options) { o.dra, o.taintGPUNodes = true, true }, wantErr: "--taint-gpu-nodes"},
		{name: "dra with a negative QPS", edit: func(o *options) { o.dra, o.clientQPS = true, -1 }, wantErr: "--client-qps"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &replay{o: options{policy: policies.Default, clientQPS: 1000}, registry: policies.NewRegistry()}
			tt.edit(&r.o)
			err := r.checkDRA()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("checkDRA = %v, want an error naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.o.Extender != tt.wantExtender {
				t.Errorf("extender %q, want %q", r.o.Extender, tt.wantExtender)
			}
		})
	}
}

// TestDRANode: a trace node becomes a node without the device-plugin mode's GPU resources and
// annotation, and its cards sim.MilliPerGPU units each, named as sim.NodeObject names them.
func TestDRANode(t *testing.T) {
	n := sim.Node{Name: "n0", MilliCPU: 96000, MemoryMiB: 1024, GPUs: 2, Model: "V100M32"}
	node, allocatable, err := draNode(&n)
	if err != nil {
		t.Fatal(err)
	}
	want := v1.ResourceList{v1.ResourceCPU: resource.MustParse("96"), v1.ResourceMemory: resource.MustParse("1Gi"), v1.ResourcePods: resource.MustParse("1000")}
	if diff := cmp.Diff(want, allocatable, quantities()); diff != "" {
		t.Errorf("allocatable (-want,+got):\n%s", diff)
	}
	if node.Name != "n0" || len(node.Annotations) != 0 || node.Labels["kubernetes.io/hostname"] != "n0" {
		t.Errorf("node %s: annotations %v, labels %v", node.Name, node.Annotations, node.Labels)
	}
	wantCards := []framework.DRACard{{Index: 0, UUID: "n0-gpu0", Model: "V100M32", CapacityBytes: 1000 << 30},
		{Index: 1, UUID: "n0-gpu1", Model: "V100M32", CapacityBytes: 1000 << 30}}
	if diff := cmp.Diff(wantCards, draCards(&n, 1<<30)); diff != "" {
		t.Errorf("cards (-want,+got):\n%s", diff)
	}
}

// quantities compares quantities by value.
func quantities() cmp.Option {
	return cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })
}

// TestConverter: a gpu-mem pod of the sequence is created as DRA mode's webhook admits it
// (its claim template made, the pod patched to claim it), a template is read and made once
// however many pods ask alike, and a pod without gpu-mem is left as it is.
func TestConverter(t *testing.T) {
	names := contract.DefaultNames()
	client := fake.NewClientset()
	conv := newConverter(client, draconvert.DefaultConfig(names))
	ctx := context.Background()
	gpuPod := func(seq int) *v1.Pod {
		return sim.PodObject(&sim.Pod{Name: "p", MilliCPU: 1000, MemoryMiB: 1024, NumGPU: 2, GPUMilli: 500}, seq, &names)
	}
	got, err := conv.convert(ctx, gpuPod(0))
	if err != nil {
		t.Fatal(err)
	}
	tmpls, err := client.ResourceV1().ResourceClaimTemplates(namespace).List(ctx, metav1.ListOptions{})
	if err != nil || len(tmpls.Items) != 1 {
		t.Fatalf("templates %+v, %v; want one", tmpls, err)
	}
	tmpl := tmpls.Items[0]
	exact := tmpl.Spec.Spec.Devices.Requests[0].Exactly
	if exact.Count != 2 || !exact.Capacity.Requests["memory"].Equal(resource.MustParse("500Gi")) {
		t.Errorf("template asks %d devices of %v, want 2 of 500Gi memory", exact.Count, exact.Capacity.Requests)
	}
	want := gpuPod(0)
	want.Annotations[draconvert.AnnotationConverted] = `{"main":1000}`
	want.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpushare-0", ResourceClaimTemplateName: ptr.To(tmpl.Name)}}
	c := &want.Spec.Containers[0]
	c.Resources.Limits = v1.ResourceList{}
	c.Resources.Claims = []v1.ResourceClaim{{Name: "gpushare-0"}}
	if diff := cmp.Diff(want, got, quantities()); diff != "" {
		t.Errorf("converted pod (-want,+got):\n%s", diff)
	}
	client.ClearActions()
	if _, err := conv.convert(ctx, gpuPod(1)); err != nil {
		t.Fatal(err)
	}
	if acts := client.Actions(); len(acts) != 0 {
		t.Errorf("second pod asking alike: %d API calls, want none (the template is known): %v", len(acts), acts)
	}
	cpuPod := sim.PodObject(&sim.Pod{Name: "cpu", MilliCPU: 1000, MemoryMiB: 1024}, 2, &names)
	if got, err := conv.convert(ctx, cpuPod.DeepCopy()); err != nil || !cmp.Equal(cpuPod, got, quantities()) {
		t.Errorf("pod without gpu-mem: %v, %v; want it unchanged", cmp.Diff(cpuPod, got, quantities()), err)
	}
}

// claimWith is claim name allocated for pod uid with one result per device of pool, each
// consuming memory bytes.
func claimWith(name, uid, pool string, memory int64, devices ...string) resourcev1.ResourceClaim {
	c := resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
	c.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "pod", UID: types.UID(uid)}}
	a := &resourcev1.AllocationResult{}
	for _, d := range devices {
		a.Devices.Results = append(a.Devices.Results, resourcev1.DeviceRequestAllocationResult{Request: "gpu", Driver: draDriver, Pool: pool, Device: d,
			ConsumedCapacity: map[resourcev1.QualifiedName]resource.Quantity{"memory": *resource.NewQuantity(memory, resource.BinarySI)}})
	}
	c.Status.Allocation = a
	return c
}

// boundPod is pod name (UID uid) on node, whose container main was converted from units of
// gpu-mem over gpus cards and whose claim is the ResourceClaim claim.
func boundPod(name, uid, node string, units int64, gpus string, claim string) v1.Pod {
	return v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid), Annotations: map[string]string{
			draconvert.AnnotationConverted: `{"main":` + strconv.FormatInt(units, 10) + `}`, contract.DefaultGPUsPerContainer: gpus}},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "main",
			Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpushare-0"}}}}}},
		Status: v1.PodStatus{ResourceClaimStatuses: []v1.PodResourceClaimStatus{{Name: "gpushare-0", ResourceClaimName: ptr.To(claim)}}},
	}
}

func TestCheckClaims(t *testing.T) {
	const gib = int64(1) << 30
	names := contract.DefaultNames()
	tests := []struct {
		name      string
		pods      []v1.Pod
		claims    []resourcev1.ResourceClaim
		wantPods  int
		wantBytes int64
		want      []string
	}{
		{name: "as asked, over two cards", pods: []v1.Pod{boundPod("p", "u", "n1", 4, "2", "c")},
			claims: []resourcev1.ResourceClaim{claimWith("c", "u", "n1", 2*gib, "gpu-0", "gpu-1")}, wantPods: 1, wantBytes: 4 * gib},
		{name: "a pod without gpu-mem and a rejected pod's claim not allocated",
			pods:   []v1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "cpu"}, Spec: v1.PodSpec{NodeName: "n1"}}},
			claims: []resourcev1.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Name: "rejected"}}}},
		{name: "claim missing", pods: []v1.Pod{boundPod("p", "u", "n1", 4, "1", "gone")}, wantPods: 1,
			want: []string{"pod p container main: no ResourceClaim"}},
		{name: "not allocated", pods: []v1.Pod{boundPod("p", "u", "n1", 4, "1", "c")},
			claims: []resourcev1.ResourceClaim{{ObjectMeta: metav1.ObjectMeta{Name: "c"}}}, wantPods: 1,
			want: []string{"pod p container main claim c: not allocated"}},
		{name: "other than asked", pods: []v1.Pod{boundPod("p", "u", "n1", 1, "1", "c")},
			claims: []resourcev1.ResourceClaim{claimWith("c", "u", "n1", 2*gib, "gpu-0")}, wantPods: 1, wantBytes: 2 * gib,
			want: []string{"pod p container main claim c: device n1/gpu-0 holds 2147483648 bytes, want 1073741824"}},
		{name: "one card twice, off the pod's node, for another pod", pods: []v1.Pod{boundPod("p", "u", "n1", 2, "2", "c")},
			claims: []resourcev1.ResourceClaim{claimWith("c", "other", "n2", gib, "gpu-0", "gpu-0")}, wantPods: 1, wantBytes: 2 * gib,
			want: []string{"pod p container main claim c: device n2/gpu-0 is not on the pod's node n1; device n2/gpu-0 is not on the pod's node n1; " +
				"on 1 distinct cards, want 2; not reserved for the pod"}},
		{name: "allocated for a pod that is not bound", pods: []v1.Pod{boundPod("p", "u", "", 1, "1", "c")},
			claims: []resourcev1.ResourceClaim{claimWith("c", "u", "n1", gib, "gpu-0")},
			want:   []string{"claim c is allocated, but no bound pod uses it"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkClaims(tt.pods, tt.claims, &names, draDriver)
			if got.pods != tt.wantPods || got.bytes != tt.wantBytes {
				t.Errorf("%d pods, %d bytes; want %d, %d", got.pods, got.bytes, tt.wantPods, tt.wantBytes)
			}
			if diff := cmp.Diff(tt.want, got.problems); diff != "" {
				t.Errorf("problems (-want,+got):\n%s", diff)
			}
		})
	}
}
