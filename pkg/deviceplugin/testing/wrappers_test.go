package testing

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/contract"
)

func TestMakePodRoundTrips(t *testing.T) {
	pod := MakePod().Name("p").Node("n1").InitContainer("i", 1).Container("a", 2).Container("b", 0).
		Placement(contract.Allocation{"init-0": {1: 1}, "0": {1: 2}}).Obj()
	names := contract.DefaultNames()
	req, err := contract.ParseRequest(pod, &names)
	if err != nil {
		t.Fatal(err)
	}
	alloc, ok, err := contract.AllocationFromPod(pod, &req)
	if err != nil || !ok {
		t.Fatalf("AllocationFromPod: ok=%v err=%v", ok, err)
	}
	if diff := cmp.Diff(contract.Allocation{"init-0": {1: 1}, "0": {1: 2}}, alloc); diff != "" {
		t.Errorf("placement (-want,+got):\n%s", diff)
	}
	if got := pod.Annotations[contract.AnnotationIndex]; got != "1" {
		t.Errorf("index annotation = %q, want 1", got)
	}
}
