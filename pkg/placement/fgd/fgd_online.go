package fgd

import (
	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

// Weights of fgd-online's terms, one setting for every workload (docs/placement.md has the
// experiments behind them).
const (
	// strandWeight weighs the CPU-stranding look-ahead against FGD's fragmentation change.
	strandWeight = 1
	// reserveWeight weighs the cost of taking model-constrained capacity.
	reserveWeight = 2
	// leftoverWeight weighs the sliver penalty (see fragScorer.slivers).
	leftoverWeight = 1
)

var (
	_ placement.Learner         = (*Online)(nil)
	_ placement.LearnedReporter = (*Online)(nil)
	_ placement.NodeSyncer      = (*Online)(nil)
	_ placement.CardPicker      = (*fgdOnlinePod)(nil)
)

// Online is gpushare's default policy, fgd-online. It scores a placement by FGD's fragmentation gradient
// (placement.md §2) over a distribution it learns online from the pods it observes (decayed
// counts, bounded memory; see onlineDistribution), plus two look-aheads that FGD lacks, all in
// milli-GPU before FGD's integer sigmoid:
//
//   - CPU stranding: the change in idle GPU units that the node's free CPU can no longer serve
//     at the workload's CPU per GPU unit (strandDelta);
//   - model reservation: a pod that accepts any model pays for the units it takes from a node
//     that model-constrained pods can use, in proportion to how far their demand exceeds the
//     supply of the models they accept (reservation);
//   - slivers: a placement that leaves a card with a little free capacity, under a fifth of a
//     card, pays those units again, and one that fills such a sliver in earns them back
//     (slivers): FGD already counts them for the task types too big for them, but the tiny
//     pods that could use them are too rare to keep it from creating them when a tighter or
//     emptier card scores about the same.
//
// Card choice and node ties are FGD's (best integer score, lowest card index; ties to the
// scheduler's node order). Safe for concurrent use; ForPod results serve one goroutine.
type Online struct {
	learned *onlineDistribution
	views   *fragViews
}

// NewOnline returns an fgd-online policy that has learned nothing yet.
func NewOnline() *Online {
	return &Online{learned: newOnlineDistribution(learnHalfLife), views: newFragViews()}
}

// OnlineName names Online in the policy registry and in --policy.
const OnlineName = "fgd-online"

// Name is OnlineName.
func (f *Online) Name() string { return OnlineName }

// Observe learns the pod's shape.
func (f *Online) Observe(req *gpumem.PodRequest, res placement.PodResources) {
	f.learned.observe(ShapeOf(req, res.MilliCPU))
}

// Rebuild relearns from the pods on nodes (model constraints are not in the cache, so the
// rebuilt shapes accept any model until new pods are observed).
func (f *Online) Rebuild(nodes []*placement.NodeInfo) { f.learned.reset(countPods(nodes)) }

// Learned returns the task shapes remembered and the task types of the typical set.
func (f *Online) Learned() (shapes, typical int) { return f.learned.size() }

// SyncNodes makes the model supply count exactly the cards of nodes (deleted nodes drop out)
// and prepares each node's view under the current distribution.
func (f *Online) SyncNodes(nodes []*placement.NodeInfo) {
	f.views.sync(nodes, f.learned.current.Load())
}

// ForPod returns fgd-online's scorer for one pod.
func (f *Online) ForPod(res placement.PodResources) placement.Scorer {
	return &fgdOnlinePod{fragPod{s: newFragScorer(f.learned.current.Load(), f.views, res)}}
}

// fgdOnlinePod is fgd-online's scorer for one pod; cards are ranked as fgd ranks them.
type fgdOnlinePod struct{ fragPod }

func (p *fgdOnlinePod) ScoreNode(node *placement.NodeInfo, plan *placement.Plan, req *gpumem.PodRequest) float64 {
	units := plan.TotalCharge(req)
	d := p.s.planDelta(node, plan, req)
	d += strandWeight * p.s.strandDelta(units)
	d += leftoverWeight * p.s.slivers(node, plan, req)
	if len(req.Models) == 0 && units > 0 {
		d += reserveWeight * float64(units) * p.s.reservation() * p.s.view.milliPerUnit
	}
	return p.s.views.steps.score(d)
}
