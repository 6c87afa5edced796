package placement_test

// The tests of a policy, one file per policy: a new policy's author copies this file. It
// checks, on hand-built nodes whose numbers are all in the tables, how the policy ranks the
// cards of a node (RankGPU), what it scores a node with a plan applied (ScoreNode, the values
// worked out by hand in the comments), and the order in which a Decision under the policy
// puts the nodes a pod fits, with the cards it plans on each.

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

func TestBinpackRankGPU(t *testing.T) {
	node := snap("n", gpu(16, 10), gpu(16, 4), gpu(32, 0)) // free 6, 12, 32
	tests := []struct {
		name  string
		units int64
		want  []float64 // per card: the units left after the pod, the fewest first
	}{
		{"one unit", 1, []float64{5, 11, 31}},
		{"the tightest card's whole free block", 6, []float64{0, 6, 26}},
	}
	var b placement.Binpack
	if b.Name() != "binpack" || b.EmptiestFirst() || b.ForPod(placement.PodResources{MilliCPU: 1000}) != b {
		t.Fatalf("binpack is %q, emptiest first %v, and ForPod is not itself", b.Name(), b.EmptiestFirst())
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []float64
			for g := range node.GPUs {
				got = append(got, b.RankGPU(node, g, tt.units, one(tt.units)))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("RankGPU (-want,+got):\n%s", diff)
			}
		})
	}
}

// scoreCases are plans on hand-built nodes with the fullness binpack scores them (spread scores
// its negation): the plan's cards' used units after the pod over their capacity, plus the
// node's likewise over 100.
func scoreCases() []struct {
	name     string
	node     *placement.NodeInfo
	req      *gpumem.PodRequest
	slots    []placement.Slot
	fullness float64
} {
	busy := func() *placement.NodeInfo { return snap("n", gpu(16, 10), gpu(16, 4)) } // used 14 of 32
	pending := snap("n", gpu(16, 0))
	pending.PendingUnits = 8
	pending.Summarize()
	return []struct {
		name     string
		node     *placement.NodeInfo
		req      *gpumem.PodRequest
		slots    []placement.Slot
		fullness float64
	}{
		{"the fuller card", busy(), one(4), []placement.Slot{{GPU: 0, Units: 4}}, 14.0/16 + 18.0/32/100},
		{"the emptier card", busy(), one(4), []placement.Slot{{GPU: 1, Units: 4}}, 8.0/16 + 18.0/32/100},
		{"a full card", busy(), one(6), []placement.Slot{{GPU: 0, Units: 6}}, 1 + 20.0/32/100},
		{"two cards count together", busy(), ask(ctr("0", 8, 2)),
			[]placement.Slot{{GPU: 0, Units: 4}, {GPU: 1, Units: 4}}, 22.0/32 + 22.0/32/100},
		{"two containers on one card", busy(), ask(ctr("a", 3, 1), ctr("b", 3, 1)),
			[]placement.Slot{{Container: 0, GPU: 0, Units: 3}, {Container: 1, GPU: 0, Units: 3}}, 16.0/16 + 20.0/32/100},
		// init 4 and app 5 on card 0 charge max(4, 5).
		{"an init container beside its app charges the larger", busy(), ask(initCtr("init-0", 4), ctr("0", 5, 1)),
			[]placement.Slot{{Container: 1, GPU: 0, Units: 5}, {Container: 0, GPU: 0, Units: 4}}, 15.0/16 + 19.0/32/100},
		{"pending units fill the node, not the card", pending, one(4), []placement.Slot{{GPU: 0, Units: 4}}, 4.0/16 + 12.0/16/100},
		{"an empty plan: the node alone", busy(), ask(), nil, 14.0 / 32 / 100},
	}
}

func TestBinpackScoreNode(t *testing.T) {
	for _, tt := range scoreCases() {
		t.Run(tt.name, func(t *testing.T) {
			got := placement.Binpack{}.ScoreNode(tt.node, &placement.Plan{Slots: tt.slots}, tt.req)
			if diff := cmp.Diff(tt.fullness, got, approx); diff != "" {
				t.Errorf("ScoreNode (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestBinpackOrder: the fullest card after the pod wins, the fullest node breaks a tie between
// equally full cards, and the tightest card of each node is planned.
func TestBinpackOrder(t *testing.T) {
	tests := []struct {
		name  string
		nodes []*placement.NodeInfo
		req   *gpumem.PodRequest
		want  []string // name[cards], best first
	}{
		// a: card 12/16; b: card 10/16 although the node is fuller; c: card 12/16, node 28/32.
		{name: "the fullest card, then the fullest node",
			nodes: []*placement.NodeInfo{
				snap("a", gpu(16, 8)),
				snap("b", gpu(16, 6), gpu(16, 16), gpu(16, 16), gpu(16, 16)),
				snap("c", gpu(16, 16), gpu(16, 8)),
				snap("d", gpu(16, 13)), // 3 free: the pod does not fit
			},
			req: one(4), want: []string{"c[1]", "a[0]", "b[0]"}},
		// a: 8 free on card 1 is tighter than 16 on card 0; b's 5 free is tightest of all.
		{name: "the tightest card that fits",
			nodes: []*placement.NodeInfo{snap("a", gpu(16, 0), gpu(16, 8)), snap("b", gpu(16, 11), gpu(16, 0))},
			req:   one(5), want: []string{"b[0]", "a[1]"}},
		{name: "two cards: the two tightest",
			nodes: []*placement.NodeInfo{snap("a", gpu(16, 0), gpu(16, 8), gpu(16, 12), gpu(16, 4))},
			req:   ask(ctr("0", 8, 2)), want: []string{"a[2 1]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := ranked(placement.Binpack{}, tt.req, tt.nodes...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("order (-want,+got):\n%s", diff)
			}
		})
	}
}
