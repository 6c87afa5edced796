package placement_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
	placementtesting "github.com/gpushare/gpushare/pkg/placement/testing"
)

// wantFirstFit is the allocator's rule restated as a selection: count times, among the cards
// that fit and are not yet taken, the one the driver publishes first: the lowest index (index),
// the least free memory then the lowest index (tightest), the most free then the lowest index
// (emptiest).
func wantFirstFit(node *placement.NodeInfo, order placement.CardOrder, units int64, count int, req *gpumem.PodRequest) ([]int, bool) {
	earlier := func(a, b int) bool { // a published before b
		fa, fb := node.GPUs[a].Free(), node.GPUs[b].Free()
		switch {
		case order == placement.CardOrderTightest && fa != fb:
			return fa < fb
		case order == placement.CardOrderEmptiest && fa != fb:
			return fa > fb
		}
		return a < b
	}
	taken := map[int]bool{}
	var out []int
	for range count {
		best := -1
		for g := range node.GPUs {
			fits := node.GPUs[g].Healthy && node.GPUs[g].Free() >= units && req.AcceptsModel(node.GPUs[g].Model)
			if fits && !taken[g] && (best < 0 || earlier(g, best)) {
				best = g
			}
		}
		if best < 0 {
			return out, false
		}
		taken[best] = true
		out = append(out, best)
	}
	return out, true
}

func TestFirstFit(t *testing.T) {
	tests := []struct {
		name   string
		cards  []placementtesting.Card
		units  int64
		count  int
		models []string
	}{
		{name: "one card, orders disagree", cards: placementtesting.Frees(300, 800, 1000, 600), units: 500, count: 1},
		{name: "a card too small is skipped", cards: placementtesting.Frees(400, 450, 900, 500), units: 500, count: 1},
		{name: "ties in free memory go to the lowest index", cards: placementtesting.Frees(700, 600, 700, 600), units: 550, count: 1},
		{name: "an unhealthy card is skipped", cards: []placementtesting.Card{{Free: 1000, Unhealthy: true}, {Free: 800}, {Free: 900}}, units: 500, count: 1},
		{name: "a card of a model the claim refuses is skipped", cards: []placementtesting.Card{{Free: 1000, Model: "P100"}, {Free: 600, Model: "V100"}, {Free: 900, Model: "V100"}},
			units: 500, count: 1, models: []string{"V100"}},
		{name: "two whole cards are two distinct cards", cards: placementtesting.Frees(1000, 0, 1000, 1000), units: 1000, count: 2},
		{name: "two half cards take two distinct cards, never one twice", cards: placementtesting.Frees(1000, 600, 1000, 700), units: 500, count: 2},
		{name: "four of eight, some too full", cards: placementtesting.Frees(1000, 200, 500, 1000, 1000, 900, 1000, 100), units: 500, count: 4},
		{name: "fewer cards fit than asked", cards: placementtesting.Frees(1000, 400, 300, 1000), units: 500, count: 3},
		{name: "nothing fits", cards: placementtesting.Frees(100, 200), units: 500, count: 1},
	}
	for _, tt := range tests {
		for _, order := range placement.CardOrders() {
			t.Run(tt.name+"/"+string(order), func(t *testing.T) {
				node, req := placementtesting.CardNode("n", tt.cards...), placementtesting.Claim(tt.units, tt.count, tt.models...)
				wantCards, wantOK := wantFirstFit(node, order, tt.units, tt.count, req)
				gotCards, gotOK := placement.FirstFit(node, order, tt.units, tt.count, req)
				if gotOK != wantOK || (wantOK && !cmp.Equal(wantCards, gotCards)) {
					t.Errorf("FirstFit = %v, %v; want %v, %v", gotCards, gotOK, wantCards, wantOK)
				}
			})
		}
	}
}

// TestCardOrderPublished: the published order puts every card before the next by the order's
// rule, and lists each card once.
func TestCardOrderPublished(t *testing.T) {
	node := placementtesting.CardNode("n", placementtesting.Frees(300, 1000, 0, 300, 650, 1000)...)
	for _, order := range placement.CardOrders() {
		t.Run(string(order), func(t *testing.T) {
			got := order.Published(node)
			seen := map[int]bool{}
			for k, g := range got {
				seen[g] = true
				if k == 0 {
					continue
				}
				prev := got[k-1]
				fp, fg := node.GPUs[prev].Free(), node.GPUs[g].Free()
				ok := prev < g
				switch {
				case order == placement.CardOrderTightest && fp != fg:
					ok = fp < fg
				case order == placement.CardOrderEmptiest && fp != fg:
					ok = fp > fg
				}
				if !ok {
					t.Errorf("card %d (free %d) published before card %d (free %d): %v", prev, fp, g, fg, got)
				}
			}
			if len(got) != len(node.GPUs) || len(seen) != len(node.GPUs) {
				t.Errorf("Published = %v, want each of the %d cards once", got, len(node.GPUs))
			}
		})
	}
}

// TestFirstFitPlanIsTheAllocators: the plan the planner makes through the first-fit scorer,
// which the simulator charges and the extender predicts in DRA mode, takes the cards FirstFit
// takes, on every node of an openb-like cluster and for one-card and multi-card asks.
func TestFirstFitPlanIsTheAllocators(t *testing.T) {
	nodes := placementtesting.OpenbLikeCluster(300, rand.New(rand.NewPCG(1, 2)))
	asks := []struct {
		units int64
		count int
	}{{320, 1}, {470, 1}, {650, 1}, {1000, 1}, {1000, 2}, {500, 2}, {1000, 4}}
	for _, order := range placement.CardOrders() {
		for _, a := range asks {
			t.Run(fmt.Sprintf("%s/%dx%d", order, a.count, a.units), func(t *testing.T) {
				req := placementtesting.Claim(a.units, a.count)
				d := placement.NewDecision(placement.PredictFirstFit(nil, order), req, placement.PodResources{})
				for _, n := range nodes {
					want, ok := placement.FirstFit(n, order, a.units, a.count, req)
					c, err := d.Place(n, "units")
					if (err == nil) != ok {
						t.Fatalf("%s: planner fits %v, allocator %v", n.Name, err == nil, ok)
					}
					if !ok {
						continue
					}
					if got := c.Plan.UsedGPUs(); !cmp.Equal(want, got) {
						t.Errorf("%s (free %v): planned cards %v, allocator's %v", n.Name, n.UsableFree(), got, want)
					}
				}
			})
		}
	}
}
