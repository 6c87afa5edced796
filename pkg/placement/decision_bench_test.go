package placement_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/placement/policies"
	pt "github.com/gpushare/gpushare/pkg/placement/testing"
)

// BenchmarkDecision is one placement decision (score every node and choose the best, as
// Prioritize and the simulator do) at 5,000 nodes. "warm" reuses the per-node fragmentation
// memo, as in steady state where one node changes per bind; "cold" starts each decision with an
// empty memo.
func BenchmarkDecision(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	nodes := pt.OpenbLikeCluster(5000, rng)
	reqs := pt.OpenbLikeWorkload()
	before := func(i, j int) bool { return i < j }
	for _, name := range []string{"binpack", "fgd", policies.Default} {
		for _, warm := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/nodes=5000/warm=%v", name, warm), func(b *testing.B) {
				policy := trained(b, name, reqs)
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					if !warm {
						b.StopTimer()
						policy = trained(b, name, reqs)
						b.StartTimer()
					}
					r := &reqs[i%len(reqs)]
					placement.NewDecision(policy, &r.Req, r.Res).Choose(nodes, nil, before)
				}
			})
		}
	}
}

// BenchmarkDecisionTopology is BenchmarkDecision's warm decision on the same 5,000 nodes, each
// with a topology of NVLinked pairs (the multi-card shape's cards are chosen among sets; the
// one-card shapes spare the pairs), against the same nodes without topology.
func BenchmarkDecisionTopology(b *testing.B) {
	reqs := pt.OpenbLikeWorkload()
	before := func(i, j int) bool { return i < j }
	for _, name := range []string{"binpack", policies.Default} {
		for _, topo := range []bool{false, true} {
			b.Run(fmt.Sprintf("%s/nodes=5000/topology=%v", name, topo), func(b *testing.B) {
				nodes := pt.OpenbLikeCluster(5000, rand.New(rand.NewPCG(1, 2)))
				if topo {
					pt.WithTopology(nodes)
				}
				policy := trained(b, name, reqs)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; b.Loop(); i++ {
					r := &reqs[i%len(reqs)]
					placement.NewDecision(policy, &r.Req, r.Res).Choose(nodes, nil, before)
				}
			})
		}
	}
}

// trained is the named policy after it learned (or was told) the requests' distribution.
func trained(b *testing.B, name string, reqs []placement.Demand) placement.Policy {
	p, err := policies.NewRegistry().New(name)
	if err != nil {
		b.Fatal(err)
	}
	for i := range reqs {
		if l, ok := p.(placement.Learner); ok {
			l.Observe(&reqs[i].Req, reqs[i].Res)
		}
	}
	if o, ok := p.(placement.Oracle); ok {
		o.Foresee(reqs)
	}
	return p
}
