package scheduler

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
)

// TestFragMemoMatchesFresh: a policy that scores pod after pod, reusing per-node results between
// pods of the same shape, ranks every card and scores every node exactly as a policy that starts
// afresh for each pod; pods of the same units with another CPU request, and nodes that change
// between pods, get their own results.
func TestFragMemoMatchesFresh(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 9))
	nodes := openbLikeCluster(60, rng)
	reqs := openbLikeRequests()
	dist := func() *Distribution {
		counts := map[TaskShape]float64{}
		for _, r := range reqs {
			counts[ShapeOf(&r.req, r.res.MilliCPU)]++
		}
		return TypicalDistribution(counts, DefaultCoverage)
	}()
	for _, name := range []string{"fgd", "fgd-online"} {
		t.Run(name, func(t *testing.T) {
			shared := newTestPolicy(t, name, dist, reqs)
			var pods []struct {
				req contract.PodRequest
				res PodResources
			}
			for range 6 {
				r := reqs[rng.IntN(len(reqs))]
				short := r
				short.res.MilliCPU = 40000 + rng.Int64N(40000) // leaves some nodes short of CPU
				// the same pod twice (the second reuses the first's results), then one with
				// the same units and another CPU request (whose results differ).
				pods = append(pods, r, r, short)
			}
			for i, pod := range pods {
				if pod.req.Empty() {
					continue
				}
				if i%5 == 4 { // a node changes between pods
					k := rng.IntN(len(nodes))
					changed := *nodes[k]
					changed.GPUs = append([]cache.GPUInfo(nil), changed.GPUs...)
					changed.GPUs[0].Used = rng.Int64N(changed.GPUs[0].Capacity + 1)
					changed.Summarize()
					nodes[k] = &changed
				}
				fresh := ForPod(newTestPolicy(t, name, dist, reqs), pod.res)
				warm := ForPod(shared, pod.res)
				for _, n := range nodes {
					wantPlan, wantOK := PlanPod(n, &pod.req, fresh)
					gotPlan, gotOK := PlanPod(n, &pod.req, warm)
					if wantOK != gotOK {
						t.Fatalf("pod %d, node %s: fits %v with memo, %v without", i, n.Name, gotOK, wantOK)
					}
					if !wantOK {
						continue
					}
					if want, got := fresh.ScoreNode(n, wantPlan, &pod.req), warm.ScoreNode(n, gotPlan, &pod.req); got != want ||
						fmt.Sprint(gotPlan.Slots) != fmt.Sprint(wantPlan.Slots) {
						t.Fatalf("pod %d, node %s: plan %v score %v with memo, plan %v score %v without", i, n.Name, gotPlan.Slots, got, wantPlan.Slots, want)
					}
					for g := range n.GPUs {
						u := pod.req.Containers[0].PerGPU()
						if n.Card(g).Free < u {
							continue
						}
						if want, got := fresh.RankGPU(n, g, u, &pod.req), warm.RankGPU(n, g, u, &pod.req); got != want {
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

// newTestPolicy is the named policy with distribution d (fgd) or having learned reqs (fgd-online).
func newTestPolicy(t *testing.T, name string, d *Distribution, reqs []struct {
	req contract.PodRequest
	res PodResources
}) Policy {
	t.Helper()
	p, err := NewPolicies().New(name)
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := p.(Oracle); ok {
		o.SetDistribution(d)
	}
	if l, ok := p.(Learner); ok {
		for _, r := range reqs {
			l.Observe(&r.req, r.res)
		}
	}
	return p
}

// scorerOf is the fragScorer of an fgd or fgd-online policy specialised to a pod.
func scorerOf(t *testing.T, p Policy) *fragScorer {
	t.Helper()
	switch p := p.(type) {
	case *fgdPod:
		return p.s
	case *fgdOnlinePod:
		return p.s
	}
	t.Fatalf("%T is not a fragmentation policy for one pod", p)
	return nil
}
