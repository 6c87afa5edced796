package placement_test

import (
	"math/bits"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/placement"
)

// Link scores (contract.Link.Score) used by the topology tests.
const (
	sys, node, phb, pix = 10, 20, 30, 50
	nv4, nv12           = 400, 1200
)

// matrix is the topology whose links score rows[i][j].
func matrix(rows [][]int) *placement.Topology {
	return placement.NewTopology(len(rows), func(i, j int) int { return rows[i][j] })
}

// nvPairs8 is an 8-card box of NVLinked pairs (NV4 between 2k and 2k+1) on two sockets of four
// cards (PHB within a socket, SYS across).
func nvPairs8() *placement.Topology {
	return placement.NewTopology(8, func(i, j int) int {
		switch {
		case i/2 == j/2:
			return nv4
		case i/4 == j/4:
			return phb
		}
		return sys
	})
}

func TestTopologySetScore(t *testing.T) {
	tests := []struct {
		name string
		topo *placement.Topology
		set  []int
		want int
	}{
		{"empty set", nvPairs8(), nil, 0},
		{"one card", nvPairs8(), []int{3}, 0},
		{"NVLinked pair", nvPairs8(), []int{0, 1}, nv4},
		{"two pairs on one socket", nvPairs8(), []int{0, 1, 2, 3}, 2*nv4 + 4*phb},
		{"across sockets", nvPairs8(), []int{1, 4}, sys},
		{"clamped score", placement.NewTopology(2, func(int, int) int { return 1 << 20 }), []int{0, 1}, 65535},
		{"negative score is 0", placement.NewTopology(2, func(int, int) int { return -5 }), []int{0, 1}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.topo.SetScore(tt.set); got != tt.want {
				t.Errorf("SetScore(%v) = %d, want %d", tt.set, got, tt.want)
			}
		})
	}
}

func TestTopologyBestSet(t *testing.T) {
	all := []int{0, 1, 2, 3, 4, 5, 6, 7}
	tests := []struct {
		name      string
		topo      *placement.Topology
		cands     []int
		k         int
		want      []int
		wantScore int
	}{
		{"the first pair in the caller's order", nvPairs8(), all, 2, []int{0, 1}, nv4},
		{"a broken pair is skipped", nvPairs8(), []int{1, 2, 3, 4, 6, 7}, 2, []int{2, 3}, nv4},
		{"the caller's order among equal pairs", nvPairs8(), []int{7, 6, 5, 4, 3, 2, 1, 0}, 2, []int{7, 6}, nv4},
		{"two pairs of one socket", nvPairs8(), []int{1, 2, 3, 4, 5, 6, 7}, 4, []int{4, 5, 6, 7}, 2*nv4 + 4*phb},
		{"no pair left: one socket", nvPairs8(), []int{0, 2, 4, 5}, 2, []int{4, 5}, nv4},
		{"no pair left at all", nvPairs8(), []int{0, 2, 4, 6}, 2, []int{0, 2}, phb},
		{"the whole node", nvPairs8(), all, 8, all, nvPairs8().SetScore(all)},
		{"too few cards", nvPairs8(), []int{0}, 2, nil, 0},
		{"PCIe switch pairs", matrix([][]int{
			{0, pix, node, node},
			{pix, 0, node, node},
			{node, node, 0, pix},
			{node, node, pix, 0}}), []int{0, 2, 3}, 2, []int{2, 3}, pix},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cands := append([]int(nil), tt.cands...)
			got, score := tt.topo.BestSet(cands, tt.k)
			if diff := cmp.Diff(tt.want, got); diff != "" || score != tt.wantScore {
				t.Errorf("BestSet() score %d, want %d; set (-want,+got):\n%s", score, tt.wantScore, diff)
			}
			if diff := cmp.Diff(tt.cands, cands); diff != "" {
				t.Errorf("BestSet changed its argument (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestTopologyBestSetGreedy: beyond the exact search's budget (C(16, 8) sets), the greedy search
// still finds a whole NVSwitch group of two on a 16-card node, and a pair of the 64-card node.
func TestTopologyBestSetGreedy(t *testing.T) {
	groups := func(n, size int) *placement.Topology {
		return placement.NewTopology(n, func(i, j int) int {
			if i/size == j/size {
				return nv12
			}
			return sys
		})
	}
	seq := func(from, to int) []int {
		var out []int
		for i := from; i < to; i++ {
			out = append(out, i)
		}
		return out
	}
	tests := []struct {
		name  string
		topo  *placement.Topology
		cands []int
		k     int
		want  []int
	}{
		{"16 cards in two groups of 8", groups(16, 8), seq(0, 16), 8, seq(0, 8)},
		{"16 cards, the first group broken", groups(16, 8), seq(1, 16), 8, seq(8, 16)},
		{"64 cards in pairs", groups(64, 2), seq(3, 64), 2, []int{4, 5}},
		{"64 cards in groups of 8, 32 asked", groups(64, 8), seq(0, 64), 32, seq(0, 32)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, score := tt.topo.BestSet(tt.cands, tt.k)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("BestSet() (-want,+got):\n%s", diff)
			}
			if want := tt.topo.SetScore(tt.want); score != want {
				t.Errorf("BestSet() score = %d, want %d", score, want)
			}
		})
	}
}

// TestTopologyBestSetIsBest: on random 8-card topologies, BestSet's score is the highest of any
// set of k candidates (counted by brute force), and its set scores what it says.
func TestTopologyBestSetIsBest(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	scores := []int{sys, node, phb, pix, nv4, nv12}
	for trial := range 200 {
		topo := placement.NewTopology(8, func(int, int) int { return scores[rng.IntN(len(scores))] })
		var cands []int
		for g := range 8 {
			if rng.IntN(4) > 0 {
				cands = append(cands, g)
			}
		}
		k := 2 + rng.IntN(3)
		if k > len(cands) {
			continue
		}
		best := -1
		for mask := range 1 << len(cands) {
			if bits.OnesCount(uint(mask)) != k {
				continue
			}
			var set []int
			for i, g := range cands {
				if mask&(1<<i) != 0 {
					set = append(set, g)
				}
			}
			best = max(best, topo.SetScore(set))
		}
		got, score := topo.BestSet(cands, k)
		if score != best || topo.SetScore(got) != score || len(got) != k {
			t.Fatalf("trial %d: BestSet(%v, %d) = %v scoring %d (SetScore %d), want score %d", trial, cands, k, got, score, topo.SetScore(got), best)
		}
	}
}
