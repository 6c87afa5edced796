package testing

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/contract"
)

// TestClusterIsValid checks the fixture is what its doc says: every gpu-mem ask parses, every
// placement matches its ask, and the inventories decode with the intended health.
func TestClusterIsValid(t *testing.T) {
	names := contract.DefaultNames()
	healthy := map[string][]bool{}
	for _, o := range Cluster() {
		switch o := o.(type) {
		case *v1.Pod:
			req, err := contract.ParseRequest(o, &names)
			if err != nil {
				t.Errorf("pod %s: %v", o.Name, err)
				continue
			}
			alloc, ok, err := contract.AllocationFromPod(o, &req)
			if err != nil || (ok && !alloc.Matches(&req)) {
				t.Errorf("pod %s: placement %v does not match its request (err %v)", o.Name, alloc, err)
			}
		case *v1.Node:
			raw, ok := o.Annotations[names.NodeGPUsAnnotation]
			if !ok {
				continue
			}
			gpus, err := contract.DecodeGPUs(raw)
			if err != nil {
				t.Fatalf("node %s: %v", o.Name, err)
			}
			for _, g := range gpus {
				healthy[o.Name] = append(healthy[o.Name], g.Healthy)
			}
		}
	}
	want := map[string][]bool{"node-a": {true, true}, "node-b": {true, false, true}}
	if diff := cmp.Diff(want, healthy); diff != "" {
		t.Errorf("card health per node (-want,+got):\n%s", diff)
	}
}
