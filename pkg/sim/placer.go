package sim

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/scheduler"
)

// placer makes the scheduler's decisions: kube-scheduler's CPU and memory fit, then the
// extender's filter (PlanPod), the policy's node score and card choice, and the cache's assume.
//
// Tie rule: among nodes with the highest score, the one first in order wins; order is a seeded
// random permutation of the nodes, as the FGD paper's simulator breaks ties by node names
// prefixed with a seeded permutation index (placement.md §1).
type placer struct {
	cache  cache.Cache
	policy scheduler.Policy
	names  []string
	rank   []int // rank[i] is node i's position in the tie order
}

func newPlacer(nodes []Node, c cache.Cache, policy scheduler.Policy, perm []int) *placer {
	p := &placer{cache: c, policy: policy, names: make([]string, len(nodes)), rank: make([]int, len(nodes))}
	for i := range nodes {
		p.names[i] = nodes[i].Name
	}
	for pos, i := range perm {
		p.rank[i] = pos
	}
	return p
}

// choice is a candidate placement.
type choice struct {
	node  int
	plan  *scheduler.Plan
	score float64
}

// submit places pod or rejects it; it reports whether it was placed.
func (p *placer) submit(pod *v1.Pod, names *contract.Names) (bool, error) {
	req, res, err := podRequest(pod, names)
	if err != nil {
		return false, err
	}
	if l, ok := p.policy.(scheduler.Learner); ok {
		l.Observe(&req, res)
	}
	nodes := p.cache.Lookup(p.names)
	best, ok := p.choose(nodes, &req, res)
	if !ok {
		return false, nil
	}
	n := nodes[best.node]
	if _, err := p.cache.AssumePod(pod, &req, n.Name, best.plan.Allocation(n, &req)); err != nil {
		return false, fmt.Errorf("%w: pod %s on %s: %w", errNotPlaced, pod.Name, n.Name, err)
	}
	return true, nil
}

// choose is the best feasible node for the pod under the tie rule.
func (p *placer) choose(nodes []*cache.NodeInfo, req *contract.PodRequest, res scheduler.PodResources) (choice, bool) {
	policy := scheduler.ForPod(p.policy, res)
	best, scratch := choice{node: -1, plan: &scheduler.Plan{}}, &scheduler.Plan{}
	for i, n := range nodes {
		if n == nil || !podFits(n, res) || !planFor(n, req, policy, scratch) {
			continue
		}
		s := policy.ScoreNode(n, scratch, req)
		if best.node < 0 || s > best.score || (s == best.score && p.rank[i] < p.rank[best.node]) {
			best.plan, scratch = scratch, best.plan // keep the plan by pointer: it may hold its slot inline
			best.node, best.score = i, s
		}
	}
	return best, best.node >= 0
}

// planFor is the extender's filter and card choice, written into plan; a pod without gpu-mem
// fits any node (kube-scheduler does not ask the extender about it) with an empty plan.
func planFor(n *cache.NodeInfo, req *contract.PodRequest, policy scheduler.Policy, plan *scheduler.Plan) bool {
	if req.Empty() {
		plan.Slots = nil
		return true
	}
	return scheduler.PlanInto(n, req, policy, plan)
}
