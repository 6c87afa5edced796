package cache_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// draCards are two healthy 16-unit cards, published 1 then 0.
func draCards() []placement.GPUInfo {
	return []placement.GPUInfo{{Index: 1, Capacity: 16, Healthy: true}, {Index: 0, Capacity: 16, Healthy: true}}
}

// claimOn is a claim of pod's container key holding units on card index of node n.
func claimOn(pod, key string, index int, units int64) cache.ClaimCharge {
	return cache.ClaimCharge{Namespace: "default", Name: pod, UID: types.UID("uid-" + pod), Node: "n", Container: key, PerGPU: map[int]int64{index: units}}
}

// TestDRACache: a DRA node's cards replace the Node object's inventory, in the order
// published; claims charge their cards by NVML index and make up their pod's placement, with
// the CPU the pod feed knows; a node is listed only once its Node object is seen; releasing
// claims and cards undoes them.
func TestDRACache(t *testing.T) {
	type step func(c cache.Cache)
	tests := []struct {
		name       string
		steps      []step
		listed     bool
		wantUsed   []int64 // per card, in the order published
		wantPods   map[string]contract.Allocation
		wantCPU    int64 // of pod "a", when listed
		wantSource placement.InventorySource
	}{
		{name: "cards and claims", steps: []step{
			func(c cache.Cache) { c.SetNode(st.MakeNode("n").GPUs(8).Obj()) },
			func(c cache.Cache) { c.SetDRACards("n", draCards()) },
			func(c cache.Cache) { c.SetClaim("c1", claimOn("a", "0", 0, 4)) },
			func(c cache.Cache) { c.SetClaim("c2", claimOn("a", "1", 1, 2)) },
			func(c cache.Cache) { c.SetClaim("c3", claimOn("b", "0", 0, 6)) },
			func(c cache.Cache) { c.SetPod(st.MakePod().Name("a").Container().CPU(1500, 0).Node("n").Obj()) },
		}, listed: true, wantUsed: []int64{2, 10}, wantCPU: 1500, wantSource: placement.FromResourceSlice,
			wantPods: map[string]contract.Allocation{"a": {"0": {0: 4}, "1": {1: 2}}, "b": {"0": {0: 6}}}},
		{name: "claims before the Node object: not listed", steps: []step{
			func(c cache.Cache) { c.SetDRACards("n", draCards()) },
			func(c cache.Cache) { c.SetClaim("c1", claimOn("a", "0", 0, 4)) },
		}},
		{name: "claim charged anew, then another released", steps: []step{
			func(c cache.Cache) { c.SetNode(st.MakeNode("n").Obj()) },
			func(c cache.Cache) { c.SetDRACards("n", draCards()) },
			func(c cache.Cache) { c.SetClaim("c1", claimOn("a", "0", 0, 4)) },
			func(c cache.Cache) { c.SetClaim("c1", claimOn("a", "0", 1, 4)) },
			func(c cache.Cache) { c.SetClaim("c2", claimOn("b", "0", 0, 6)) },
			func(c cache.Cache) { c.RemoveClaim("c2") },
		}, listed: true, wantUsed: []int64{4, 0}, wantSource: placement.FromResourceSlice,
			wantPods: map[string]contract.Allocation{"a": {"0": {1: 4}}}},
		{name: "cards removed: back to the Node object's", steps: []step{
			func(c cache.Cache) { c.SetNode(st.MakeNode("n").GPUs(8).Obj()) },
			func(c cache.Cache) { c.SetDRACards("n", draCards()) },
			func(c cache.Cache) { c.RemoveDRACards("n") },
		}, listed: true, wantUsed: []int64{0}, wantSource: placement.FromAnnotation, wantPods: map[string]contract.Allocation{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			c := cache.New(contract.DefaultNames(), logger)
			for _, s := range tt.steps {
				s(c)
			}
			n, ok := c.Node("n")
			if ok != tt.listed {
				t.Fatalf("node listed %v, want %v", ok, tt.listed)
			}
			if !ok {
				return
			}
			var used []int64
			for _, g := range n.GPUs {
				used = append(used, g.Used)
			}
			pods := map[string]contract.Allocation{}
			for _, p := range n.Pods {
				pods[p.Name] = p.Allocation
				if p.Name == "a" && p.MilliCPU != tt.wantCPU {
					t.Errorf("pod a: MilliCPU %d, want %d", p.MilliCPU, tt.wantCPU)
				}
			}
			if diff := cmp.Diff(tt.wantUsed, used); diff != "" {
				t.Errorf("units used per card (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantPods, pods); diff != "" {
				t.Errorf("placements (-want,+got):\n%s", diff)
			}
			if n.Inventory != tt.wantSource {
				t.Errorf("inventory from %s, want %s", n.Inventory, tt.wantSource)
			}
		})
	}
}

// TestDRACacheNodeWithout: a pod whose claims are left out frees its cards in the snapshot.
func TestDRACacheNodeWithout(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	c := cache.New(contract.DefaultNames(), logger)
	c.SetNode(st.MakeNode("n").Obj())
	c.SetDRACards("n", draCards())
	c.SetClaim("c1", claimOn("a", "0", 0, 4))
	c.SetClaim("c2", claimOn("b", "0", 0, 6))
	n, _ := c.NodeWithout("n", []types.UID{"uid-a"})
	if got := n.GPUs[1].Used; got != 6 {
		t.Errorf("card 0 used %d units without pod a, want 6", got)
	}
}
