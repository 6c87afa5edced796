package fgd

import (
	"sync/atomic"

	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

var (
	_ placement.Learner    = (*FGD)(nil)
	_ placement.NodeSyncer = (*FGD)(nil)
	_ placement.Oracle     = (*FGD)(nil)
	_ placement.CardPicker = (*fgdPod)(nil)
)

// FGD is Fragmentation Gradient Descent (Weng et al., ATC'23; placement.md §2.4): the node and
// card whose placement increases the expected fragmentation least, scored as the paper's integer
// floor(100*sigmoid(-delta/1000)), with the paper's card choice (the best integer score, lowest
// index on ties). Its distribution is the workload it is told (Foresee: the simulator's oracle)
// or, in the extender, the pods running at start (Rebuild); it does not learn afterwards. Safe
// for concurrent use.
type FGD struct {
	dist  atomic.Pointer[Distribution]
	views *fragViews
}

// New returns an FGD policy with an empty distribution.
func New() *FGD { return &FGD{views: newFragViews()} }

// Name names FGD in the policy registry and in --policy.
const Name = "fgd"

// Name is the package's Name.
func (f *FGD) Name() string { return Name }

// Foresee sets the distribution to the typical pods of workload.
func (f *FGD) Foresee(workload []placement.Demand) {
	counts := map[TaskShape]float64{}
	for i := range workload {
		counts[ShapeOf(&workload[i].Req, workload[i].Res.MilliCPU)]++
	}
	f.dist.Store(TypicalDistribution(counts, DefaultCoverage))
}

// Observe does nothing: FGD's distribution is fixed.
func (f *FGD) Observe(*gpumem.PodRequest, placement.PodResources) {}

// SyncNodes makes the model supply count exactly the cards of nodes (deleted nodes drop out)
// and prepares each node's view under the current distribution.
func (f *FGD) SyncNodes(nodes []*placement.NodeInfo) { f.views.sync(nodes, f.dist.Load()) }

// Rebuild sets the distribution from the pods on nodes.
func (f *FGD) Rebuild(nodes []*placement.NodeInfo) {
	f.dist.Store(TypicalDistribution(countPods(nodes), DefaultCoverage))
}

// ForPod returns FGD's scorer for one pod.
func (f *FGD) ForPod(res placement.PodResources) placement.Scorer {
	return &fgdPod{fragPod{s: newFragScorer(f.dist.Load(), f.views, res)}}
}

// fragPod is what FGD and Online share for one pod: cards ranked by FGD's integer score of the
// card's fragmentation change, and the card planning chose remembered per node and shape.
type fragPod struct{ s *fragScorer }

func (p *fragPod) PickedCard(node *placement.NodeInfo, units int64, req *gpumem.PodRequest) (int, bool) {
	return p.s.pickedCard(node, units, req)
}

func (p *fragPod) CardPicked(node *placement.NodeInfo, units int64, req *gpumem.PodRequest, g int) {
	p.s.cardPicked(node, units, req, g)
}

func (p *fragPod) RankGPU(node *placement.NodeInfo, g int, units int64, _ *gpumem.PodRequest) float64 {
	return p.s.cardRank(node, g, units)
}

// fgdPod is FGD's scorer for one pod.
type fgdPod struct{ fragPod }

func (p *fgdPod) ScoreNode(node *placement.NodeInfo, plan *placement.Plan, req *gpumem.PodRequest) float64 {
	return p.s.views.steps.score(p.s.planDelta(node, plan, req))
}

// countPods counts the shapes of the pods holding GPU memory on nodes.
func countPods(nodes []*placement.NodeInfo) map[TaskShape]float64 {
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
func shapeOfPlaced(p *placement.PodInfo) TaskShape {
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
