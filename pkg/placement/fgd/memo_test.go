package fgd

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpushare/gpushare/pkg/placement"
	pt "github.com/gpushare/gpushare/pkg/placement/testing"
)

// TestFragMemoMatchesFresh: a policy that scores pod after pod, reusing per-node results between
// pods of the same shape, ranks every card and scores every node exactly as a policy that starts
// afresh for each pod; pods of the same units with another CPU request, and nodes that change
// between pods, get their own results.
func TestFragMemoMatchesFresh(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	nodes := pt.OpenbLikeCluster(60, rng)
	reqs := pt.OpenbLikeWorkload()
	dist := func() *Distribution {
		counts := map[TaskShape]float64{}
		for _, r := range reqs {
			counts[ShapeOf(&r.Req, r.Res.MilliCPU)]++
		}
		return TypicalDistribution(counts, DefaultCoverage)
	}()
	for _, name := range []string{"fgd", "fgd-online"} {
		t.Run(name, func(t *testing.T) {
			shared := newTestPolicy(t, name, dist, reqs)
			var pods []placement.Demand
			for range 6 {
				r := reqs[rng.IntN(len(reqs))]
				short := r
				short.Res.MilliCPU = 40000 + rng.Int64N(40000) // leaves some nodes short of CPU
				// the same pod twice (the second reuses the first's results), then one with
				// the same units and another CPU request (whose results differ).
				pods = append(pods, r, r, short)
			}
			// then the same pods in reverse: shapes come back after others (the memo keeps
			// several per node).
			for i := len(pods) - 1; i >= 0; i-- {
				pods = append(pods, pods[i])
			}
			for i, pod := range pods {
				if pod.Req.Empty() {
					continue
				}
				if i%5 == 4 { // a node changes between pods
					k := rng.IntN(len(nodes))
					changed := *nodes[k]
					changed.SetGPUs(changed.GPUs)
					changed.GPUs[0].Used = rng.Int64N(changed.GPUs[0].Capacity + 1)
					changed.Summarize()
					nodes[k] = &changed
				}
				fresh := newTestPolicy(t, name, dist, reqs).ForPod(pod.Res)
				warm := shared.ForPod(pod.Res)
				for _, n := range nodes {
					wantPlan, wantOK := placement.PlanPod(n, &pod.Req, fresh)
					gotPlan, gotOK := placement.PlanPod(n, &pod.Req, warm)
					if wantOK != gotOK {
						t.Fatalf("pod %d, node %s: fits %v with memo, %v without", i, n.Name, gotOK, wantOK)
					}
					if !wantOK {
						continue
					}
					if want, got := fresh.ScoreNode(n, wantPlan, &pod.Req), warm.ScoreNode(n, gotPlan, &pod.Req); got != want ||
						fmt.Sprint(gotPlan.Slots) != fmt.Sprint(wantPlan.Slots) {
						t.Fatalf("pod %d, node %s: plan %v score %v with memo, plan %v score %v without", i, n.Name, gotPlan.Slots, got, wantPlan.Slots, want)
					}
					for g := range n.GPUs {
						u := pod.Req.Containers[0].PerGPU()
						if n.GPUs[g].Free() < u {
							continue
						}
						if want, got := fresh.RankGPU(n, g, u, &pod.Req), warm.RankGPU(n, g, u, &pod.Req); got != want {
							t.Fatalf("pod %d, node %s, card %d: rank %v with memo, %v without", i, n.Name, g, got, want)
						}
						if want, got := scorerOf(t, fresh).cardDelta(n, g, u), scorerOf(t, warm).cardDelta(n, g, u); got != want {
							t.Fatalf("pod %d, node %s, card %d: fragmentation change %v with memo, %v without", i, n.Name, g, got, want)
						}
					}
				}
			}
		})
	}
}

// TestCardMemoShapes: the memo returns each of the last memoShapes shapes' results, and a new
// shape beyond them evicts the one used least recently.
func TestCardMemoShapes(t *testing.T) {
	var m cardMemo
	after, rank := make([]float64, 2), make([]float64, 2)
	for u := int64(1); u <= memoShapes; u++ {
		m.store(u, 100, []float64{float64(u), 0}, []float64{-float64(u), 0}, int(u%2))
	}
	for u := int64(1); u <= memoShapes; u++ {
		picked, ok := m.load(u, 100, after, rank)
		if !ok || after[0] != float64(u) || rank[0] != -float64(u) || picked != int(u%2) {
			t.Errorf("shape %d: ok %v, after %v, rank %v, picked %d", u, ok, after, rank, picked)
		}
	}
	if _, ok := m.load(1, 200, after, rank); ok {
		t.Error("a shape with another CPU request loaded another's results")
	}
	if _, ok := m.load(1, 100, make([]float64, 3), make([]float64, 3)); ok {
		t.Error("results for 2 cards loaded for 3")
	}
	m.store(1, 100, []float64{10, 0}, []float64{-10, 0}, 1) // an update keeps its slot
	m.store(memoShapes+1, 100, []float64{9, 0}, []float64{-9, 0}, 0)
	if _, ok := m.load(2, 100, after, rank); ok {
		t.Error("the shape used least recently survived a new one")
	}
	if _, ok := m.load(1, 100, after, rank); !ok || after[0] != 10 {
		t.Errorf("the updated shape: ok %v, after %v", ok, after)
	}
	if _, ok := m.load(memoShapes+1, 100, after, rank); !ok || after[0] != 9 {
		t.Errorf("the new shape: ok %v, after %v", ok, after)
	}
}

// newTestPolicy is the named policy with distribution d (fgd) or having learned reqs (fgd-online).
func newTestPolicy(t *testing.T, name string, d *Distribution, reqs []placement.Demand) placement.Policy {
	t.Helper()
	switch name {
	case "fgd":
		p := New()
		p.dist.Store(d)
		return p
	case "fgd-online":
		p := NewOnline()
		for i := range reqs {
			p.Observe(&reqs[i].Req, reqs[i].Res)
		}
		return p
	}
	t.Fatalf("no policy %q", name)
	return nil
}

// scorerOf is the fragScorer of an fgd or fgd-online scorer for one pod.
func scorerOf(t *testing.T, s placement.Scorer) *fragScorer {
	t.Helper()
	switch s := s.(type) {
	case *fgdPod:
		return s.s
	case *fgdOnlinePod:
		return s.s
	}
	t.Fatalf("%T is not a fragmentation scorer for one pod", s)
	return nil
}
