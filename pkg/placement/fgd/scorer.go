package fgd

import (
	"math"
	"slices"

	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

// fragScorer computes FGD's fragmentation change for one pod over the nodes of one decision.
// It keeps the last node's fragmentation and per-card results, since PlanPod ranks every card
// of a node and ScoreNode then scores the chosen one, and it shares a node's per-card results
// with later pods of the same shape through the node's fragEntry (cardMemo). Not safe for
// concurrent use.
type fragScorer struct {
	dist  *Distribution
	views *fragViews
	res   placement.PodResources
	entry *fragEntry
	view  *fragView
	base  float64 // fragmentation of view.node before the pod
	// after and rank are per card: the fragmentation with units placed there and RankGPU's
	// result for it; NaN if unknown. units is what they hold results for, -1 for nothing.
	after, rank []float64
	units       int64
	// picked is the card planning chose for units on the node (cardPicker), -2 if unknown.
	picked int
	// fresh is true when after or rank gained results since the node's memo was read.
	fresh bool
	work  []int64
	// weights[i] is group i's weight of task types that fit the node's CPU left after the pod;
	// weighed is true once it is computed for the current node.
	weights []float64
	weighed bool
	// pressure is the model pressure per group, fetched once per pod; pressed lists the
	// groups under pressure (few: only model-constrained groups can be).
	pressure []float64
	pressed  []int
}

func newFragScorer(d *Distribution, views *fragViews, res placement.PodResources) *fragScorer {
	if d == nil {
		d = &Distribution{}
	}
	return &fragScorer{dist: d, views: views, res: res, units: -1}
}

// use prepares s for node, reusing the previous node's results when it is the same snapshot.
func (s *fragScorer) use(node *placement.NodeInfo) {
	if s.view != nil && s.view.node == node {
		return
	}
	s.publish()
	s.entry = s.views.get(node, s.dist)
	s.view, s.base, s.units, s.weighed = s.entry.view, s.entry.base, -1, false
}

// forUnits makes after and rank hold results for units, starting from the node's memo when
// it is for the same pod shape.
func (s *fragScorer) forUnits(units int64) {
	if units == s.units {
		return
	}
	s.publish()
	s.units = units
	n := len(s.view.free)
	s.after, s.rank = slices.Grow(s.after[:0], n)[:n], slices.Grow(s.rank[:0], n)[:n]
	var ok bool
	if s.picked, ok = s.entry.memo.load(units, s.res.MilliCPU, s.after, s.rank); !ok {
		nanFill(s.after)
		nanFill(s.rank)
		s.picked = -2
	}
}

// publish stores what s learned about the current node in its memo.
func (s *fragScorer) publish() {
	if !s.fresh {
		return
	}
	s.fresh = false
	s.entry.memo.store(s.units, s.res.MilliCPU, s.after, s.rank, s.picked)
}

// nanFill sets every element of buf to NaN (unknown).
func nanFill(buf []float64) {
	for i := range buf {
		buf[i] = math.NaN()
	}
}

// cardDelta is the change in fragmentation (milli-GPU) of placing units on card g of node.
func (s *fragScorer) cardDelta(node *placement.NodeInfo, g int, units int64) float64 {
	s.use(node)
	s.forUnits(units)
	if math.IsNaN(s.after[g]) {
		if h := s.view.class[g]; h != g && !math.IsNaN(s.after[h]) { // an identical card's result
			s.after[g] = s.after[h]
		} else {
			s.after[g] = s.view.fragOneCard(s.dist, g, units, s.groupWeights())
		}
		s.fresh = true
	}
	return (s.after[g] - s.base) * s.view.milliPerUnit
}

// cardRank is RankGPU's value for units on card g of node: minus FGD's integer score of the
// card's fragmentation change.
func (s *fragScorer) cardRank(node *placement.NodeInfo, g int, units int64) float64 {
	s.use(node)
	s.forUnits(units)
	if math.IsNaN(s.rank[g]) {
		s.rank[g] = -s.views.steps.score(s.cardDelta(node, g, units))
		s.fresh = true
	}
	return s.rank[g]
}

// pickedCard returns the card planning chose for units on node for a pod of this shape
// accepting any model; a pod constrained to models ranks afresh.
func (s *fragScorer) pickedCard(node *placement.NodeInfo, units int64, req *gpumem.PodRequest) (int, bool) {
	if len(req.Models) > 0 {
		return 0, false
	}
	s.use(node)
	s.forUnits(units)
	return s.picked, s.picked > -2
}

// cardPicked remembers planning's choice for a pod accepting any model.
func (s *fragScorer) cardPicked(node *placement.NodeInfo, units int64, req *gpumem.PodRequest, g int) {
	if len(req.Models) > 0 {
		return
	}
	s.use(node)
	s.forUnits(units)
	s.picked, s.fresh = g, true
}

// groupWeights returns weights for the current node, computing them on first use.
func (s *fragScorer) groupWeights() []float64 {
	if !s.weighed {
		s.weights = s.weights[:0]
		for i := range s.dist.groups {
			s.weights = append(s.weights, s.dist.groups[i].weightFitting(s.view.cpu-s.res.MilliCPU))
		}
		s.weighed = true
	}
	return s.weights
}

// planDelta is the change in fragmentation (milli-GPU) of applying plan to node.
func (s *fragScorer) planDelta(node *placement.NodeInfo, plan *placement.Plan, req *gpumem.PodRequest) float64 {
	s.use(node)
	if len(plan.Slots) == 1 {
		return s.cardDelta(node, plan.Slots[0].GPU, plan.Slots[0].Units)
	}
	s.work = append(s.work[:0], s.view.free...)
	for _, g := range plan.UsedGPUs() {
		s.work[g] -= plan.Charge(req, g)
	}
	f := s.view.frag(s.dist, s.work, s.view.cpu-s.res.MilliCPU, s.groupWeights())
	return (f - s.base) * s.view.milliPerUnit
}

// strandDelta is the change (milli-GPU) in GPU capacity expected to be stranded by lack of CPU
// when the pod takes units GPU units and its CPU from the node: the idle units beyond what the
// free CPU can serve at the distribution's CPU per unit.
func (s *fragScorer) strandDelta(units int64) float64 {
	k := s.dist.cpuPerUnit
	if k <= 0 {
		return 0
	}
	idle := s.view.idle
	before := max(0, float64(idle)-float64(s.view.cpu)/k)
	after := max(0, float64(idle-units)-float64(s.view.cpu-s.res.MilliCPU)/k)
	return (after - before) * s.view.milliPerUnit
}

// sliverShare is the share of a card below which a card's free capacity counts as a sliver.
const sliverShare = 5 // a fifth

// slivers is the change (milli-GPU) in sliver capacity on the cards plan touches: a card's free
// units count when they are under a fifth of its capacity (and not zero), so creating a sliver
// costs its units and filling one in pays them back.
func (s *fragScorer) slivers(node *placement.NodeInfo, plan *placement.Plan, req *gpumem.PodRequest) float64 {
	var change int64
	caps := node.Capacities() // the snapshot's summary, next to its free units: no GPUInfo read
	for i, slot := range plan.Slots {
		if !plan.FirstSlotOn(i) {
			continue
		}
		c, free := caps[slot.GPU], s.view.free[slot.GPU]
		change += sliver(free-plan.Charge(req, slot.GPU), c) - sliver(free, c)
	}
	return float64(change) * s.view.milliPerUnit
}

// sliver is free when it is a sliver of a card of capacity c, else 0.
func sliver(free, c int64) int64 {
	if free > 0 && free*sliverShare < c {
		return free
	}
	return 0
}

// reservation is the pressure of the model-constrained task types that can use the current
// node: the sum of their demand-to-supply ratios.
func (s *fragScorer) reservation() float64 {
	if s.pressure == nil {
		s.pressure = s.views.pressure(s.dist)
		s.pressed = s.pressed[:0]
		for i, p := range s.pressure {
			if p > 0 {
				s.pressed = append(s.pressed, i)
			}
		}
	}
	r := 0.0
	for _, i := range s.pressed {
		if s.view.masks[i] != 0 {
			r += s.pressure[i]
		}
	}
	return r
}
