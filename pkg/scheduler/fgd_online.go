package scheduler

import (
	"math"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
)

// fgdOnline is gpushare's default policy: FGD's fragmentation gradient over a distribution
// learned online from the pods seen (see onlineDistribution), with deliberate packing among
// near-equal nodes instead of FGD's accidental fixed-order ties.
type fgdOnline struct {
	name    string
	learned *onlineDistribution
	views   *fragViews
	tie     func(node *cache.NodeInfo, plan *Plan, req *contract.PodRequest) float64
	strand  float64
	// cardFit breaks card ties towards the tightest card; exactTie breaks node ties by the
	// exact change in fragmentation.
	cardFit, exactTie bool
	// withMem counts memory in the stranding look-ahead; temp is the sigmoid's scale (1000 in
	// FGD): larger values make more near-equal nodes tie.
	withMem bool
	temp    float64
	// cpuOnlyFull sends pods without GPUs to the nodes whose GPUs are most allocated among
	// equal scores.
	cpuOnlyFull bool
	// reserve is the weight of the model-reservation cost: a pod that accepts any model pays
	// for the units it takes from cards that model-constrained pods need.
	reserve float64
}

func newFGDOnline(name string, tie func(*cache.NodeInfo, *Plan, *contract.PodRequest) float64, strand float64) *fgdOnline {
	return &fgdOnline{name: name, learned: newOnlineDistribution(learnHalfLife), views: newFragViews(), tie: tie, strand: strand, temp: 1000}
}

func (f *fgdOnline) Name() string { return f.name }

// Observe learns the pod's shape.
func (f *fgdOnline) Observe(req *contract.PodRequest, res PodResources) {
	f.learned.observe(ShapeOf(req, res.MilliCPU), res.Memory)
}

// Rebuild relearns from the pods on nodes.
func (f *fgdOnline) Rebuild(nodes []*cache.NodeInfo) { f.learned.reset(countPods(nodes)) }

func (f *fgdOnline) ForPod(res PodResources) Policy {
	return &fgdOnlinePod{f: f, s: newFragScorer(f.learned.current.Load(), f.views, res)}
}

func (f *fgdOnline) RankGPU(node *cache.NodeInfo, g int, units int64, req *contract.PodRequest) float64 {
	return f.ForPod(PodResources{}).RankGPU(node, g, units, req)
}

func (f *fgdOnline) ScoreNode(node *cache.NodeInfo, plan *Plan, req *contract.PodRequest) float64 {
	return f.ForPod(PodResources{}).ScoreNode(node, plan, req)
}

// fgdOnlinePod is fgdOnline for one pod.
type fgdOnlinePod struct {
	f *fgdOnline
	s *fragScorer
}

func (p *fgdOnlinePod) Name() string { return p.f.name }

func (p *fgdOnlinePod) RankGPU(node *cache.NodeInfo, g int, units int64, _ *contract.PodRequest) float64 {
	r := -p.s.views.steps.score(p.s.cardDelta(node, g, units) * 1000 / p.f.temp)
	if p.f.cardFit && node.GPUs[g].Capacity > 0 {
		r += 0.99 * float64(node.GPUs[g].Free()-units) / float64(node.GPUs[g].Capacity)
	}
	return r
}

func (p *fgdOnlinePod) ScoreNode(node *cache.NodeInfo, plan *Plan, req *contract.PodRequest) float64 {
	var units int64
	for _, g := range plan.UsedGPUs() {
		units += plan.Charge(req, g)
	}
	d := p.s.planDelta(node, plan, func(g int) int64 { return plan.Charge(req, g) })
	if p.f.strand > 0 {
		d += p.f.strand * p.s.strandDelta(units, p.f.withMem)
	}
	if p.f.reserve > 0 && len(req.Models) == 0 {
		d += p.f.reserve * float64(units) * p.s.reservation() * p.s.view.milliPerUnit
	}
	d *= 1000 / p.f.temp
	s := p.s.views.steps.score(d)
	if p.f.exactTie {
		return s + 0.5 - 0.49*math.Tanh(d/1000)
	}
	if p.f.tie != nil {
		s += 0.99 * p.f.tie(node, plan, req)
	}
	if p.f.cpuOnlyFull && req.Empty() {
		s += 0.99 * tieAllocated(node, plan, req)
	}
	return s
}

// tieNone leaves ties to the scheduler's node order.
func tieNone(*cache.NodeInfo, *Plan, *contract.PodRequest) float64 { return 0 }

// tieAllocated prefers the node whose GPUs are most allocated after placement (0..1).
func tieAllocated(node *cache.NodeInfo, plan *Plan, req *contract.PodRequest) float64 {
	t := node.TotalUnits()
	if t == 0 {
		return 0
	}
	var add int64
	for _, g := range plan.UsedGPUs() {
		add += plan.Charge(req, g)
	}
	return float64(node.UsedUnits()+add) / float64(t)
}

// tieBigNodes prefers nodes with more cards (0..1).
func tieBigNodes(node *cache.NodeInfo, _ *Plan, _ *contract.PodRequest) float64 {
	return min(1, float64(len(node.GPUs))/16)
}

// tieSmallNodes prefers nodes with fewer cards (0..1).
func tieSmallNodes(node *cache.NodeInfo, _ *Plan, _ *contract.PodRequest) float64 {
	return 1 - min(1, float64(len(node.GPUs))/16)
}
