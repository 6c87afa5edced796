package sim

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// placer makes the scheduler's decisions through the extender's own pipeline
// (placement.Decision): kube-scheduler's CPU and memory fit, then the extender's filter and
// the policy's node score and card choice, then the cache's assume. A pod without gpu-mem fits
// any node with an empty plan (kube-scheduler does not ask the extender about it).
//
// Tie rule: among nodes with the highest score, the one first in order wins; order is a seeded
// random permutation of the nodes, as the FGD paper's simulator breaks ties by node names
// prefixed with a seeded permutation index (placement.md §1).
type placer struct {
	cache  cache.Cache
	policy placement.Policy
	names  []string
	rank   []int // rank[i] is node i's position in the seeded tie order
	// extenderTies breaks ties by the pod's placement.TieOrder instead.
	extenderTies bool
	// sampler, when set, limits each decision to the nodes kube-scheduler would hand the
	// extender; sampled is its buffer.
	sampler *sampler
	sampled []*placement.NodeInfo
	// learnAtBind teaches a learning policy a pod once it is placed, and only a pod with
	// gpu-mem, as the extender learns at bind; otherwise every pod is learned when submitted.
	learnAtBind bool
	// nodes are the submitted pods' nodes in order, "" for a rejected pod.
	nodes []string
	// multi, when set, measures the multi-card containers against the nodes' links.
	multi *multiCard
	// preempt, when set, frees a card for a pod that fits no node (preemption.go).
	preempt *preempter
	// dra, when set, places pods as under DRA: kube-scheduler's allocator takes the cards
	// (dra.go).
	dra *draPlacer
}

func newPlacer(nodes []Node, c cache.Cache, policy placement.Policy, perm []int) *placer {
	p := &placer{cache: c, policy: policy, names: make([]string, len(nodes)), rank: make([]int, len(nodes))}
	for i := range nodes {
		p.names[i] = nodes[i].Name
	}
	for pos, i := range perm {
		p.rank[i] = pos
	}
	return p
}

// submit places pod or rejects it; it reports whether it was placed.
func (p *placer) submit(pod *v1.Pod, names *contract.Names) (bool, error) {
	req, res, err := podRequest(pod, names)
	if err != nil {
		return false, err
	}
	l, learns := p.policy.(placement.Learner)
	if learns && !p.learnAtBind {
		l.Observe(&req, res)
	}
	d, best, ok, err := p.decide(pod, &req, res, names.UnitLabel())
	if err != nil {
		return false, err
	}
	if !ok && p.preempt != nil {
		if best, ok, err = p.preempted(d, pod); err != nil {
			return false, err
		}
	}
	if !ok {
		p.nodes = append(p.nodes, "")
		return false, nil
	}
	charge := func(node string, alloc contract.Allocation) (contract.Allocation, error) {
		return p.cache.AssumePod(pod, &req, node, alloc)
	}
	alloc, err := d.Assume(best, p.cache.Node, charge, names.UnitLabel())
	if err != nil {
		return false, fmt.Errorf("%w: pod %s on %s: %w", errNotPlaced, pod.Name, best.Node.Name, err)
	}
	p.nodes = append(p.nodes, best.Node.Name)
	if p.multi != nil {
		p.multi.record(best.Node, &req, alloc)
	}
	if learns && p.learnAtBind && !req.Empty() {
		l.Observe(&req, res)
	}
	return true, nil
}

// choose is the best node for d's pod among those with its CPU and memory free (and, with a
// sampler, among those kube-scheduler would sample), ties broken by the tie order.
func (p *placer) choose(d *placement.Decision, pod *v1.Pod) (placement.Choice, bool) {
	res := d.Resources()
	admit := func(n *placement.NodeInfo) bool { return podFits(n, res) }
	before := func(i, j int) bool { return p.rank[i] < p.rank[j] }
	if p.extenderTies {
		before = func(i, j int) bool {
			return placement.TieOrder(pod.Namespace, pod.Name, p.names[i]) < placement.TieOrder(pod.Namespace, pod.Name, p.names[j])
		}
	}
	nodes := p.cache.Lookup(p.names)
	if p.sampler != nil {
		p.sampled = p.sampler.sample(nodes, p.sampleFits(d), p.sampled)
		nodes = p.sampled
	}
	return d.Choose(nodes, admit, before)
}

// preempted frees a node for d's pod by preemption and chooses the pod's cards there; ok is
// false when no preemption frees a node for it. The node, once its victims are gone, must take
// the pod: an error says the simulator and the planner disagree.
func (p *placer) preempted(d *placement.Decision, pod *v1.Pod) (placement.Choice, bool, error) {
	node, ok := p.preempt.free(p.cache, p.cache.Lookup(p.names), d, cache.PodPriority(pod))
	if !ok {
		return placement.Choice{}, false, nil
	}
	best, ok := d.Choose([]*placement.NodeInfo{node}, nil, func(int, int) bool { return false })
	if !ok {
		return placement.Choice{}, false, fmt.Errorf("%w: pod %s does not fit %s after preempting", errNotPlaced, pod.Name, node.Name)
	}
	return best, true, nil
}
