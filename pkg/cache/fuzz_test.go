package cache_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// FuzzNodeInventory feeds the cache a node whose GPU annotation (gpushare.io/gpus, what the
// device plugin writes) and allocatable gpu-mem and gpu-count are fuzzed, and a pod bound to it
// with a fuzzed placement annotation. The node's cards are the decoded annotation when it is
// valid, else gpu-mem split evenly over gpu-count; the pod's units are all charged, to its
// cards or as pending; the summaries agree with the cards; and the audit against the same
// objects finds no difference (a placement the pod carries may put a card over capacity: the
// audit must then list it). `go test` replays the seeds and testdata/fuzz/FuzzNodeInventory;
// `make fuzz` mutates them (CONTRIBUTING.md).
func FuzzNodeInventory(f *testing.F) {
	f.Add(`[{"index":0,"uuid":"GPU-a","model":"Tesla T4","units":16,"healthy":true}]`, true, int64(16), int64(1), `{"0":{"0":4}}`, int64(4))
	f.Add(`[{"index":0,"units":16,"healthy":true},{"index":3,"units":8}]`, true, int64(16), int64(2), `{"0":{"3":4}}`, int64(4))
	f.Add(`[{"index":0,"units":2,"healthy":true}]`, true, int64(2), int64(1), `{"0":{"0":4}}`, int64(4))
	f.Add(`[{"index":0},{"index":0}]`, true, int64(32), int64(2), `{"0":{"1":4}}`, int64(4))
	f.Add(`[{"index":0,"units":16,"healthy":true,"links":"X NV4","topologyVersion":1},{"index":1,"units":16,"healthy":true,"links":"NV4 X","topologyVersion":1}]`, true, int64(32), int64(2), `{"0":{"0":4}}`, int64(4))
	f.Add(`[{"index":0,"units":16,"healthy":true,"links":"X NV99999999999 Y"},{"index":1,"units":16,"links":"PIX"}]`, true, int64(32), int64(2), `{"0":{"1":4}}`, int64(4))
	f.Add(``, false, int64(32), int64(4), `{"0":{"9":2}}`, int64(2))
	f.Add(``, false, int64(0), int64(4), `{"0":{"0":2}}`, int64(2))
	f.Add(``, false, int64(7), int64(-3), `garbage`, int64(1))
	f.Add(``, false, int64(16), int64(2), `{"0":{"0":1,"1":1}}`, int64(2))
	f.Fuzz(func(t *testing.T, ann string, hasAnn bool, total, count int64, alloc string, units int64) {
		units = 1 + (units-1)&63 // 1 to 64, 0 is 64
		node := st.MakeNode("n1").EvenSplit(total, count).Obj()
		if hasAnn {
			node.Annotations[contract.DefaultNodeGPUsKey] = ann
		}
		pod := st.MakePod().Name("p").GPUMem(units).Node("n1").Placement(alloc).Obj()
		logger, _ := ktesting.NewTestContext(t)
		names := contract.DefaultNames()
		c := cache.New(names, logger)
		c.SetNode(node)
		c.SetPod(pod)

		n, ok := c.Node("n1")
		if !ok {
			t.Fatalf("node n1 is not in the cache")
		}
		wantSrc, wantGPUs := wantInventory(node, hasAnn, ann)
		if n.Inventory != wantSrc {
			t.Errorf("inventory from %s, want %s", n.Inventory, wantSrc)
		}
		if diff := cmp.Diff(wantGPUs, n.GPUs, cmpopts.EquateEmpty(), cmpopts.IgnoreFields(placement.GPUInfo{}, "Used")); diff != "" {
			t.Errorf("cards (-want,+got):\n%s", diff)
		}
		if topo := n.Topology; topo != nil && topo.Cards() != len(n.GPUs) {
			t.Errorf("a topology of %d cards on a node of %d", topo.Cards(), len(n.GPUs))
		}
		checkCharges(t, n, units)
		r := cache.Audit(c, []v1.Node{*node}, []v1.Pod{*pod}, names)
		if len(r.Differences) != 0 {
			t.Errorf("audit against the same objects: %q", r.Differences)
		}
		if over := cache.OvercommittedCards([]*placement.NodeInfo{n}); len(r.Overcommitted) != over {
			t.Errorf("audit lists %q over capacity; %d cards of the snapshot are", r.Overcommitted, over)
		}
	})
}

// wantInventory is the node's cards by the contract: the annotation when present and valid,
// else allocatable gpu-mem split evenly over gpu-count (at least one card), all healthy, and
// none when that makes more than MaxGPUsPerNode cards or more than MaxUnitsPerGPU per card.
func wantInventory(node *v1.Node, hasAnn bool, ann string) (placement.InventorySource, []placement.GPUInfo) {
	if hasAnn {
		if gpus, err := contract.DecodeGPUs(ann); err == nil {
			out := make([]placement.GPUInfo, len(gpus))
			for i, g := range gpus {
				out[i] = placement.GPUInfo{Index: g.Index, UUID: g.UUID, Model: g.Model, Capacity: g.Units, Healthy: g.Healthy}
			}
			return placement.FromAnnotation, out
		}
	}
	alloc := node.Status.Allocatable
	total, count := quantityOf(alloc, contract.DefaultResourceName), quantityOf(alloc, contract.DefaultCountName)
	if total <= 0 {
		return placement.FromEvenSplit, nil
	}
	count = max(count, 1)
	if count > contract.MaxGPUsPerNode || total/count > contract.MaxUnitsPerGPU {
		return placement.FromEvenSplit, nil // beyond the bounds: no cards
	}
	out := make([]placement.GPUInfo, count)
	for i := range out {
		out[i] = placement.GPUInfo{Index: i, Capacity: total / count, Healthy: true}
	}
	return placement.FromEvenSplit, out
}

func quantityOf(l v1.ResourceList, name v1.ResourceName) int64 {
	q := l[name]
	return (&q).Value()
}

// checkCharges checks that the pod's units are all charged to n, on cards or pending, and that
// n's summaries agree with its cards.
func checkCharges(t *testing.T, n *placement.NodeInfo, units int64) {
	t.Helper()
	var used, capacity, maxFree int64
	for _, g := range n.GPUs {
		used += g.Used
		capacity += g.Capacity
		if g.Healthy {
			maxFree = max(maxFree, g.Free())
		}
	}
	if used+n.PendingUnits != units {
		t.Errorf("%d units on cards + %d pending, want the pod's %d", used, n.PendingUnits, units)
	}
	if n.MaxFree != maxFree || n.UsedUnits() != units || n.TotalUnits() != capacity {
		t.Errorf("MaxFree = %d, UsedUnits() = %d, TotalUnits() = %d; want %d, %d and %d", n.MaxFree, n.UsedUnits(), n.TotalUnits(),
			maxFree, units, capacity)
	}
	if len(n.Pods) != 1 || n.Pods[0].Units != units {
		t.Errorf("pods on the node = %+v, want p with %d units", n.Pods, units)
	}
}
