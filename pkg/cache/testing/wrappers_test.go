package testing

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/contract"
)

// TestAllocationRoundTrips: a pod built with Allocation reads back, through the contract, as
// the placement it was given.
func TestAllocationRoundTrips(t *testing.T) {
	pod := MakePod().Name("p").Node("n1").NamedInitGPUMem("i", 1).NamedGPUMem("a", 2).NamedGPUMem("b", 0).
		Allocation(contract.Allocation{"init-0": {1: 1}, "0": {1: 2}}).Obj()
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
	if got := []string{pod.Spec.InitContainers[0].Name, pod.Spec.Containers[0].Name, pod.Spec.Containers[1].Name}; !cmp.Equal(got, []string{"i", "a", "b"}) {
		t.Errorf("container names %v", got)
	}
}
