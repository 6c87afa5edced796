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

// TestTopologyClusterIsValid checks the topology fixture: its placements match their asks and
// its inventory decodes into a link matrix with the NUMA nodes its doc gives.
func TestTopologyClusterIsValid(t *testing.T) {
	names := contract.DefaultNames()
	for _, o := range TopologyCluster() {
		switch o := o.(type) {
		case *v1.Pod:
			req, err := contract.ParseRequest(o, &names)
			if err != nil {
				t.Fatalf("pod %s: %v", o.Name, err)
			}
			if alloc, ok, err := contract.AllocationFromPod(o, &req); err != nil || !ok || !alloc.Matches(&req) {
				t.Errorf("pod %s: placement %v does not match its request (err %v)", o.Name, alloc, err)
			}
		case *v1.Node:
			gpus, err := contract.DecodeGPUs(o.Annotations[names.NodeGPUsAnnotation])
			if err != nil {
				t.Fatal(err)
			}
			top, err := contract.TopologyOf(gpus)
			if err != nil || top == nil {
				t.Fatalf("TopologyOf() = %v, %v; want a matrix", top, err)
			}
			var numa []int
			for _, g := range gpus {
				numa = append(numa, *g.NUMA)
			}
			if diff := cmp.Diff([]int{0, 0, 1, 1}, numa); diff != "" {
				t.Errorf("NUMA nodes (-want,+got):\n%s", diff)
			}
			if got := top.Link(0, 1); got != contract.NVLinkOf(4) {
				t.Errorf("Link(0,1) = %v, want NV4", got)
			}
		}
	}
}

// TestCapacityClusterIsValid checks the capacity fixture: its inventory decodes, each card's
// units are its usable memory in GiB, and card 1 is unhealthy.
func TestCapacityClusterIsValid(t *testing.T) {
	names := contract.DefaultNames()
	for _, o := range CapacityCluster() {
		node, ok := o.(*v1.Node)
		if !ok {
			continue
		}
		gpus, err := contract.DecodeGPUs(node.Annotations[names.NodeGPUsAnnotation])
		if err != nil {
			t.Fatal(err)
		}
		var healthy []bool
		for _, g := range gpus {
			healthy = append(healthy, g.Healthy)
			if g.UsableBytes != g.MemoryBytes-g.ReservedBytes || g.Units != names.UnitsOf(uint64(g.UsableBytes)) { //nolint:gosec // G115: fixture bytes
				t.Errorf("GPU %d: %+v: usable is not total less reserved, or units not usable in GiB", g.Index, g)
			}
		}
		if diff := cmp.Diff([]bool{true, false}, healthy); diff != "" {
			t.Errorf("health (-want,+got):\n%s", diff)
		}
	}
}
