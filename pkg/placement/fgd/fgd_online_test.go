package fgd_test

// The tests of the fgd-online policy in the shape of placement's policy tests: its scores are
// fgd's (fgd_test.go) with three more terms in the delta, each worked out by hand here.

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/placement/fgd"
)

func TestFGDOnlineOrder(t *testing.T) {
	tests := []struct {
		name     string
		learn    bool // observe one pod of halves
		nodes    []*placement.NodeInfo
		req      *gpumem.PodRequest
		milliCPU int64
		want     []string
	}{
		// fgd's scores (fgd_test.go), but g's 100 left is a sliver (under a fifth of a card):
		// delta 100+100, score 45, no better than e's 200 left (not a sliver, 45).
		{name: "a sliver left costs its units again", learn: true,
			nodes: []*placement.NodeInfo{cards("e", 0, 700), cards("g", 1, 600), cards("f", 2, 1000), cards("b", 3, 600, 1000), cards("x", 4, 400)},
			req:   oneCard(500), milliCPU: 1000,
			want: []string{"f[0]=50", "b[1]=50", "e[0]=45", "g[0]=45"}},
		// s: card 1's 150 are a fragment and a sliver: filling it is delta -150-150, score 57
		// (fgd: 53).
		{name: "a sliver filled earns its units back", learn: true,
			nodes: []*placement.NodeInfo{cards("f", 0, 1000), cards("s", 1, 1000, 150)},
			req:   oneCard(150), milliCPU: 1000,
			want: []string{"s[1]=57", "f[0]=50"}},
		// halves ask 2 millicores per unit. k: before, 2000 idle units and 4000 millicores free
		// (no unit stranded); after, 1500 idle and 2000 free, which serve 1000: 500 stranded,
		// delta 500, score 37. fgd scores both nodes 50.
		{name: "idle units the CPU left cannot serve", learn: true,
			nodes: []*placement.NodeInfo{withCPU(cards("k", 0, 1000, 1000), 4000), cards("f", 1, 1000)},
			req:   oneCard(500), milliCPU: 2000,
			want: []string{"f[0]=50", "k[0]=37"}},
		// Nothing learned: no fragments and no CPU per unit, but slivers still count.
		{name: "untaught, it still avoids slivers",
			nodes: []*placement.NodeInfo{cards("g", 0, 600), cards("e", 1, 700), cards("f", 2, 1000)},
			req:   oneCard(500), milliCPU: 1000,
			want: []string{"e[0]=50", "f[0]=50", "g[0]=47"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fgd.NewOnline()
			if p.Name() != "fgd-online" {
				t.Errorf("Name() = %q, want fgd-online", p.Name())
			}
			if tt.learn {
				p.Observe(&halves.Req, halves.Res)
			}
			got := order(p, tt.req, placement.PodResources{MilliCPU: tt.milliCPU}, tt.nodes...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("order (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestFGDOnlineReservation: after one pod of halves and one of halves that accept only V100
// cards, on a cluster of one V100 card and one T4 card, the V100 pods' demand share (1/2) is
// their supply share (1/2): pressure 1. A pod that accepts any model then pays twice its units
// on the V100 node (delta 0 + 2*500*1, score 26). On the T4 node the V100 halves see all 1000,
// then 500, idle units as fragments (weight 1/2): delta -250, score 56. A V100 pod pays nothing.
func TestFGDOnlineReservation(t *testing.T) {
	v100 := cards("v", 0, 1000)
	v100.GPUs[0].Model = "Tesla V100-SXM2-16GB"
	v100.Summarize()
	nodes := []*placement.NodeInfo{v100, cards("t", 1, 1000)}
	onlyV100 := oneCard(500)
	onlyV100.SetModels([]string{"V100"})
	tests := []struct {
		name string
		req  *gpumem.PodRequest
		want []string
	}{
		{"a pod of any model", oneCard(500), []string{"t[0]=56", "v[0]=26"}},
		{"a V100 pod", onlyV100, []string{"v[0]=50"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fgd.NewOnline()
			p.Observe(&halves.Req, halves.Res)
			p.Observe(onlyV100, halves.Res)
			if shapes, typical := p.Learned(); shapes != 2 || typical != 2 {
				t.Fatalf("Learned() = %d shapes, %d typical; want 2, 2", shapes, typical)
			}
			p.SyncNodes(nodes)
			got := order(p, tt.req, halves.Res, nodes...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("order (-want,+got):\n%s", diff)
			}
		})
	}
}
