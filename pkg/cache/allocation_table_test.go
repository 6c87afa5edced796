package cache

import (
	"errors"
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/gpumem"
)

// TestAllocationTableShares: pods with the same placement annotation share one decoded
// placement and per-GPU sums; another annotation gets its own; a malformed one is an error
// and is not remembered; a pod with only the index annotation is decoded as before.
func TestAllocationTableShares(t *testing.T) {
	pod := func(ann map[string]string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Annotations: ann}}
	}
	req := &contract.PodRequest{Containers: []contract.ContainerRequest{{Key: "0", Units: 4, GPUs: 1}}}
	var tab allocationTable
	a1, per1, ok1, err1 := tab.fromPod(pod(map[string]string{contract.AnnotationAllocation: `{"0":{"1":4}}`}), req)
	a2, per2, ok2, err2 := tab.fromPod(pod(map[string]string{contract.AnnotationAllocation: `{"0":{"1":4}}`}), req)
	if err := errors.Join(err1, err2); err != nil || !ok1 || !ok2 {
		t.Fatalf("fromPod: %v %v %v", ok1, ok2, err)
	}
	if diff := cmp.Diff(gpumem.Allocation{"0": {1: 4}}, a1); diff != "" {
		t.Errorf("allocation (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(map[int]int64{1: 4}, per1); diff != "" {
		t.Errorf("per GPU (-want,+got):\n%s", diff)
	}
	if reflect.ValueOf(a1).Pointer() != reflect.ValueOf(a2).Pointer() || reflect.ValueOf(per1).Pointer() != reflect.ValueOf(per2).Pointer() {
		t.Error("two pods with one placement annotation got placements of their own")
	}
	a3, _, _, err := tab.fromPod(pod(map[string]string{contract.AnnotationAllocation: `{"0":{"0":4}}`}), req)
	if err != nil || reflect.ValueOf(a3).Pointer() == reflect.ValueOf(a1).Pointer() {
		t.Errorf("another annotation: %v, shared=%v", err, reflect.ValueOf(a3).Pointer() == reflect.ValueOf(a1).Pointer())
	}
	if _, _, ok, err := tab.fromPod(pod(map[string]string{contract.AnnotationAllocation: `{"0":{"1":-4}}`}), req); ok || !errors.Is(err, contract.ErrInvalidAllocation) {
		t.Errorf("malformed annotation: ok=%v err=%v, want ErrInvalidAllocation", ok, err)
	}
	if len(tab.byRaw) != 2 {
		t.Errorf("table holds %d placements, want 2 (the malformed one is not kept)", len(tab.byRaw))
	}
	a4, per4, ok, err := tab.fromPod(pod(map[string]string{contract.AnnotationIndex: "2"}), req)
	if err != nil || !ok || !cmp.Equal(a4, gpumem.Allocation{"0": {2: 4}}) || !cmp.Equal(per4, map[int]int64{2: 4}) {
		t.Errorf("index annotation: %v %v %v %v", a4, per4, ok, err)
	}
	if _, _, ok, err := tab.fromPod(pod(nil), req); ok || err != nil {
		t.Errorf("no annotation: ok=%v err=%v, want neither", ok, err)
	}
}
