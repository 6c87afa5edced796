package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// TestDRANode checks that a node of DRA mode keeps framework.GPUNode's CPU, memory and pods
// but publishes nothing of the device-plugin mode.
func TestDRANode(t *testing.T) {
	names := contract.DefaultNames()
	node, alloc, err := draNode("n1")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := node.Annotations[names.NodeGPUsAnnotation]; ok {
		t.Errorf("node has the device plugin's annotation %s", names.NodeGPUsAnnotation)
	}
	got := map[string]string{}
	for name, q := range alloc {
		got[string(name)] = q.String()
	}
	want := map[string]string{"cpu": "64", "memory": "256Gi", "pods": "110"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("allocatable (-want,+got):\n%s", diff)
	}
}

// TestDRACards checks the cards a node publishes: 8 of 16 GiB, indexed, distinct UUIDs.
func TestDRACards(t *testing.T) {
	cards := draCards("n1", 1<<30)
	if len(cards) != 8 {
		t.Fatalf("%d cards, want 8", len(cards))
	}
	for i, c := range cards {
		want := framework.DRACard{Index: i, UUID: "GPU-n1-" + string(rune('0'+i)), Model: "Tesla T4", CapacityBytes: 16 << 30}
		if diff := cmp.Diff(want, c); diff != "" {
			t.Errorf("card %d (-want,+got):\n%s", i, diff)
		}
	}
}

// testGPUPod is a gpu-mem pod of units GiB, as bench.gpuPod builds it.
func testGPUPod(units int64) *v1.Pod {
	b := &bench{c: &framework.Cluster{}}
	b.c.SchedulerName = "default-scheduler"
	return b.gpuPod("shape", units)
}

// TestNewDRAShapes checks that each size converts once into a pod that asks its memory
// through one claim of a template of its own, and no longer asks gpu-mem.
func TestNewDRAShapes(t *testing.T) {
	names := contract.DefaultNames()
	shapes, templates, err := newDRAShapes(testGPUPod)
	if err != nil {
		t.Fatal(err)
	}
	if len(templates) != 8 {
		t.Errorf("%d templates, want one per size (8)", len(templates))
	}
	seen := map[string]bool{}
	for units := int64(1); units <= 8; units++ {
		pod := shapes.pod("pod-x", units)
		if pod.Name != "pod-x" || pod.Namespace != namespace || pod.Spec.SchedulerName != "default-scheduler" {
			t.Errorf("%d GiB: pod %s/%s scheduler %q", units, pod.Namespace, pod.Name, pod.Spec.SchedulerName)
		}
		if _, ok := pod.Spec.Containers[0].Resources.Limits[names.Resource]; ok {
			t.Errorf("%d GiB: the converted pod still asks %s", units, names.Resource)
		}
		if len(pod.Spec.ResourceClaims) != 1 || pod.Spec.ResourceClaims[0].ResourceClaimTemplateName == nil {
			t.Fatalf("%d GiB: pod claims %v, want one from a template", units, pod.Spec.ResourceClaims)
		}
		seen[*pod.Spec.ResourceClaims[0].ResourceClaimTemplateName] = true
		if got, want := pod.Annotations[draconvert.AnnotationConverted], `{"main":`+string(rune('0'+units))+`}`; got != want {
			t.Errorf("%d GiB: annotation %q, want %q", units, got, want)
		}
		if shapes[units-1].Name != "shape" {
			t.Errorf("%d GiB: naming a pod renamed its shape to %q", units, shapes[units-1].Name)
		}
	}
	if len(seen) != 8 {
		t.Errorf("the sizes name %d templates, want 8", len(seen))
	}
}

// TestBoundAskedBytes checks the memory the bound converted pods asked.
func TestBoundAskedBytes(t *testing.T) {
	pod := func(node, note string) v1.Pod {
		p := v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Spec: v1.PodSpec{NodeName: node}}
		if note != "" {
			p.Annotations = map[string]string{draconvert.AnnotationConverted: note}
		}
		return p
	}
	tests := []struct {
		name    string
		pods    []v1.Pod
		want    int64
		wantErr string
	}{
		{name: "none", want: 0},
		{name: "bound pods add up", pods: []v1.Pod{pod("n1", `{"main":3}`), pod("n2", `{"a":1,"b":2}`)}, want: 6 << 30},
		{name: "pending pods do not count", pods: []v1.Pod{pod("", `{"main":3}`), pod("n1", `{"main":1}`)}, want: 1 << 30},
		{name: "unconverted pods do not count", pods: []v1.Pod{pod("n1", "")}, want: 0},
		{name: "bad annotation", pods: []v1.Pod{pod("n1", `{`)}, wantErr: "annotation " + draconvert.AnnotationConverted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := boundAskedBytes(tt.pods, 1<<30)
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want an error naming %q", err, tt.wantErr)
			}
			if err == nil && got != tt.want {
				t.Errorf("got %d bytes, want %d", got, tt.want)
			}
		})
	}
}
