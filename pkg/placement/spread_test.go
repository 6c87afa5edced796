package placement_test

// The tests of the spread policy, the mirror of binpack's (binpack_test.go, the file a new
// policy's author copies).

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

func TestSpreadRankGPU(t *testing.T) {
	node := snap("n", gpu(16, 10), gpu(16, 4), gpu(32, 0)) // free 6, 12, 32
	tests := []struct {
		name  string
		units int64
		want  []float64 // per card: minus the units left after the pod, the most first
	}{
		{"one unit", 1, []float64{-5, -11, -31}},
		{"the tightest card's whole free block", 6, []float64{0, -6, -26}},
	}
	var s placement.Spread
	if s.Name() != "spread" || !s.EmptiestFirst() || s.ForPod(placement.PodResources{MilliCPU: 1000}) != s {
		t.Fatalf("spread is %q, emptiest first %v, and ForPod is not itself", s.Name(), s.EmptiestFirst())
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []float64
			for g := range node.GPUs {
				got = append(got, s.RankGPU(node, g, tt.units, one(tt.units)))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("RankGPU (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestSpreadScoreNode: minus binpack's fullness, on the same plans.
func TestSpreadScoreNode(t *testing.T) {
	for _, tt := range scoreCases() {
		t.Run(tt.name, func(t *testing.T) {
			got := placement.Spread{}.ScoreNode(tt.node, &placement.Plan{Slots: tt.slots}, tt.req)
			if diff := cmp.Diff(-tt.fullness, got, approx); diff != "" {
				t.Errorf("ScoreNode (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestSpreadOrder: the emptiest card after the pod wins, the emptiest node breaks a tie between
// equally empty cards, and the emptiest card of each node is planned.
func TestSpreadOrder(t *testing.T) {
	tests := []struct {
		name  string
		nodes []*placement.NodeInfo
		req   *gpumem.PodRequest
		want  []string // name[cards], best first
	}{
		// a: card 12/16; b: card 10/16; c: card 12/16 on a fuller node; e: 4/16.
		{name: "the emptiest card, then the emptiest node",
			nodes: []*placement.NodeInfo{
				snap("a", gpu(16, 8)),
				snap("b", gpu(16, 6), gpu(16, 16), gpu(16, 16), gpu(16, 16)),
				snap("c", gpu(16, 16), gpu(16, 8)),
				snap("d", gpu(16, 13)), // 3 free: the pod does not fit
				snap("e", gpu(16, 0)),
			},
			req: one(4), want: []string{"e[0]", "b[0]", "a[0]", "c[1]"}},
		{name: "the emptiest card",
			nodes: []*placement.NodeInfo{snap("a", gpu(16, 8), gpu(16, 2)), snap("b", gpu(16, 11), gpu(32, 20))},
			req:   one(5), want: []string{"a[1]", "b[1]"}},
		{name: "two cards: the two emptiest",
			nodes: []*placement.NodeInfo{snap("a", gpu(16, 0), gpu(16, 8), gpu(16, 12), gpu(16, 4))},
			req:   ask(ctr("0", 8, 2)), want: []string{"a[0 3]"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _ := ranked(placement.Spread{}, tt.req, tt.nodes...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("order (-want,+got):\n%s", diff)
			}
		})
	}
}
