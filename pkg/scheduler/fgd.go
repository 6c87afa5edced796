package scheduler

import (
	"sync/atomic"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
)

// Oracle is an optional Policy extension for policies that take the workload's distribution
// from outside, as FGD does from the trace it is evaluated on.
type Oracle interface {
	SetDistribution(d *Distribution)
}

// fgd is Fragmentation Gradient Descent (Weng et al., ATC'23; placement.md §2.4): the node and
// card whose placement increases the expected fragmentation least, scored as the paper's integer
// floor(100*sigmoid(-delta/1000)), with the paper's card choice (the best integer score, lowest
// index on ties). Its distribution is set by SetDistribution (the simulator's oracle) or, in the
// extender, by Rebuild from the pods running at start; it does not learn afterwards.
type fgd struct {
	dist  atomic.Pointer[Distribution]
	views *fragViews
}

func newFGD() *fgd { return &fgd{views: newFragViews()} }

func (f *fgd) Name() string { return "fgd" }

func (f *fgd) SetDistribution(d *Distribution) { f.dist.Store(d) }

// Observe does nothing: FGD's distribution is fixed.
func (f *fgd) Observe(*contract.PodRequest, PodResources) {}

// SyncNodes makes the model supply count exactly the cards of nodes (deleted nodes drop out).
func (f *fgd) SyncNodes(nodes []*cache.NodeInfo) { f.views.sync(nodes) }

// Rebuild sets the distribution from the pods on nodes.
func (f *fgd) Rebuild(nodes []*cache.NodeInfo) {
	f.dist.Store(TypicalDistribution(countPods(nodes), DefaultCoverage))
}

func (f *fgd) ForPod(res PodResources) Policy {
	return &fgdPod{fragPod{s: newFragScorer(f.dist.Load(), f.views, res)}}
}

func (f *fgd) RankGPU(node *cache.NodeInfo, g int, units int64, req *contract.PodRequest) float64 {
	return f.ForPod(PodResources{}).RankGPU(node, g, units, req)
}

func (f *fgd) ScoreNode(node *cache.NodeInfo, plan *Plan, req *contract.PodRequest) float64 {
	return f.ForPod(PodResources{}).ScoreNode(node, plan, req)
}

// fragPod is what fgd and fgd-online share for one pod: cards ranked by FGD's integer score of
// the card's fragmentation change.
type fragPod struct{ s *fragScorer }

func (p *fragPod) pickedCard(node *cache.NodeInfo, units int64, req *contract.PodRequest) (int, bool) {
	return p.s.pickedCard(node, units, req)
}

func (p *fragPod) cardPicked(node *cache.NodeInfo, units int64, req *contract.PodRequest, g int) {
	p.s.cardPicked(node, units, req, g)
}

func (p *fragPod) RankGPU(node *cache.NodeInfo, g int, units int64, _ *contract.PodRequest) float64 {
	return p.s.cardRank(node, g, units)
}

// fgdPod is fgd for one pod.
type fgdPod struct{ fragPod }

func (p *fgdPod) Name() string { return "fgd" }

func (p *fgdPod) ScoreNode(node *cache.NodeInfo, plan *Plan, req *contract.PodRequest) float64 {
	return p.s.views.steps.score(p.s.planDelta(node, plan, req))
}

// countPods counts the shapes of the pods holding GPU memory on nodes.
func countPods(nodes []*cache.NodeInfo) map[TaskShape]float64 {
	counts := map[TaskShape]float64{}
	for _, n := range nodes {
		for i := range n.Pods {
			counts[shapeOfPlaced(&n.Pods[i])]++
		}
	}
	return counts
}

// shapeOfPlaced is the shape of a running pod, from its placement; model constraints are not
// recorded in the cache, so the shape accepts any model.
func shapeOfPlaced(p *cache.PodInfo) TaskShape {
	s := TaskShape{MilliCPU: max(p.MilliCPU, minTaskCPU)}
	if p.Allocation == nil {
		return TaskShape{MilliCPU: s.MilliCPU, GPUs: 1, PerGPU: p.Units}
	}
	for _, u := range p.Allocation.PerGPU() {
		s.GPUs++
		s.PerGPU = max(s.PerGPU, u)
	}
	return s
}
