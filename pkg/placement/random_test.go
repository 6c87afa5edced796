package placement_test

// The tests of the random policy (binpack_test.go is the file a new policy's author copies):
// its draws cannot be worked out by hand, so these check what holds for every draw, and that a
// seed makes them reproducible.

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/placement/policies"
)

// draws is n of r's draws, RankGPU's and ScoreNode's in turn.
func draws(r placement.Scorer, n int) []float64 {
	node, req := snap("n", gpu(16, 0)), one(1)
	out := make([]float64, n)
	for i := range out {
		if i%2 == 0 {
			out[i] = r.RankGPU(node, 0, 1, req)
		} else {
			out[i] = r.ScoreNode(node, &placement.Plan{}, req)
		}
	}
	return out
}

func TestRandomSeed(t *testing.T) {
	r := placement.NewRandom(7)
	if r.Name() != "random" {
		t.Errorf("Name() = %q, want random", r.Name())
	}
	first := draws(r.ForPod(placement.PodResources{}), 8)
	for i, d := range first {
		if d < 0 || d >= 1 {
			t.Errorf("draw %d = %v, want one in [0, 1)", i, d)
		}
	}
	if diff := cmp.Diff(first, draws(placement.NewRandom(7), 8)); diff != "" {
		t.Errorf("the same seed drew differently (-first,+again):\n%s", diff)
	}
	r.Seed(7)
	if diff := cmp.Diff(first, draws(r, 8)); diff != "" {
		t.Errorf("Seed did not restart the stream (-first,+after Seed):\n%s", diff)
	}
	if cmp.Equal(first, draws(placement.NewRandom(8), 8)) {
		t.Error("seeds 7 and 8 drew the same")
	}
}

// TestRandomChoice: whatever it draws, random chooses only a node and a card the pod fits, and
// over many seeds every node and card that fits.
func TestRandomChoice(t *testing.T) {
	nodes := []*placement.NodeInfo{
		snap("full", gpu(16, 14)),
		snap("a", gpu(16, 14), gpu(16, 0), gpu(16, 8)), // card 0 has 2 free
		snap("b", gpu(16, 4)),
	}
	seen := map[string]int{}
	for seed := range uint64(64) {
		r := placement.NewRandom(seed)
		c, ok := placement.NewDecision(r, one(4), placement.PodResources{}).Choose(nodes, nil, func(i, j int) bool { return i < j })
		if !ok {
			t.Fatalf("seed %d: no node chosen", seed)
		}
		seen[fmt.Sprintf("%s/%d", c.Node.Name, c.Plan.Slots[0].GPU)]++
	}
	for _, want := range []string{"a/1", "a/2", "b/0"} {
		if seen[want] == 0 {
			t.Errorf("64 seeds never chose %s: %v", want, seen)
		}
	}
	for got := range seen {
		if got != "a/1" && got != "a/2" && got != "b/0" {
			t.Errorf("chose %s, where the pod does not fit (%v)", got, seen)
		}
	}
}

// TestRandomRegistered: the registry's random policy starts from a fixed seed, so that two
// simulations of one trace agree.
func TestRandomRegistered(t *testing.T) {
	a, err := policies.NewRegistry().New("random")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := policies.NewRegistry().New("random")
	if diff := cmp.Diff(draws(a.ForPod(placement.PodResources{}), 6), draws(b.ForPod(placement.PodResources{}), 6)); diff != "" {
		t.Errorf("two fresh random policies drew differently (-a,+b):\n%s", diff)
	}
}
