package scheduler

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
)

// openbLikeCluster is n nodes like openb's (8-card G2 with 96 CPUs and 2-card T4 with 104), part
// used at random, and the requests of an openb-like workload.
func openbLikeCluster(n int, rng *rand.Rand) []*cache.NodeInfo {
	nodes := make([]*cache.NodeInfo, n)
	for i := range nodes {
		cards, model, cpu := 8, "G2", int64(96000)
		if i%3 == 2 {
			cards, model, cpu = 2, "T4", 104000
		}
		node := &cache.NodeInfo{Name: fmt.Sprintf("node-%05d", i), AllocatableMilliCPU: cpu,
			RequestedMilliCPU: rng.Int64N(cpu / 2), AllocatableMemory: 512 << 30}
		for g := range cards {
			used := []int64{0, 0, 1000, 810, 470, 650, 320}[rng.IntN(7)]
			node.GPUs = append(node.GPUs, cache.GPUInfo{Index: g, Model: model, Capacity: 1000, Used: used, Healthy: true})
		}
		node.Summarize()
		nodes[i] = node
	}
	return nodes
}

func openbLikeRequests() []struct {
	req contract.PodRequest
	res PodResources
} {
	out := []struct {
		req contract.PodRequest
		res PodResources
	}{}
	for _, s := range []struct {
		units int64
		gpus  int
		cpu   int64
	}{{810, 1, 3150}, {1000, 1, 11300}, {470, 1, 10000}, {650, 1, 11500}, {320, 1, 4700}, {0, 0, 2000}, {8000, 8, 64000}} {
		r := contract.PodRequest{}
		if s.gpus > 0 {
			r.Containers = []contract.ContainerRequest{{Key: "0", Units: s.units, GPUs: s.gpus}}
		}
		out = append(out, struct {
			req contract.PodRequest
			res PodResources
		}{r, PodResources{MilliCPU: s.cpu, Memory: 8 << 30}})
	}
	return out
}

// BenchmarkDecision is one placement decision (filter and score every node, as Prioritize does)
// at 5,000 nodes. "warm" reuses the per-node fragmentation memo, as in steady state where one
// node changes per bind; "cold" starts each decision with an empty memo.
func BenchmarkDecision(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	nodes := openbLikeCluster(5000, rng)
	reqs := openbLikeRequests()
	for _, name := range []string{"binpack", "fgd", DefaultPolicy} {
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
					decide(nodes, &r.req, r.res, policy)
				}
			})
		}
	}
}

// trained is the named policy after it learned (or was given) the requests' distribution.
func trained(b *testing.B, name string, reqs []struct {
	req contract.PodRequest
	res PodResources
}) Policy {
	p, err := NewPolicies().New(name)
	if err != nil {
		b.Fatal(err)
	}
	counts := map[TaskShape]float64{}
	for _, r := range reqs {
		counts[ShapeOf(&r.req, r.res.MilliCPU)]++
		if l, ok := p.(Learner); ok {
			l.Observe(&r.req, r.res)
		}
	}
	if o, ok := p.(Oracle); ok {
		o.SetDistribution(TypicalDistribution(counts, DefaultCoverage))
	}
	return p
}

// decide is the best node for the pod, as Prioritize and the simulator compute it.
func decide(nodes []*cache.NodeInfo, req *contract.PodRequest, res PodResources, policy Policy) int {
	p := ForPod(policy, res)
	best, bestScore := -1, 0.0
	var plan Plan
	for i, n := range nodes {
		plan.Slots = nil
		if !req.Empty() && !PlanInto(n, req, p, &plan) {
			continue
		}
		if s := p.ScoreNode(n, &plan, req); best < 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}
