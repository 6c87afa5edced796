package scheduler

import (
	"math"
	"slices"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
)

// fragScorer computes FGD's fragmentation change for one pod over the nodes of one decision.
// It keeps the last node's fragmentation and per-card results, since PlanPod ranks every card
// of a node and ScoreNode then scores the chosen one. Not safe for concurrent use.
type fragScorer struct {
	dist  *Distribution
	views *fragViews
	res   PodResources
	view  *fragView
	base  float64   // fragmentation of view.node before the pod
	after []float64 // per card: fragmentation with afterUnits placed there; NaN if unknown
	units int64
	work  []int64
	// weights[i] is group i's weight of task types that fit the node's CPU left after the pod.
	weights []float64
	// pressure is the model pressure per group, fetched once per pod.
	pressure []float64
}

func newFragScorer(d *Distribution, views *fragViews, res PodResources) *fragScorer {
	if d == nil {
		d = &Distribution{}
	}
	return &fragScorer{dist: d, views: views, res: res}
}

// use prepares s for node, reusing the previous node's results when it is the same snapshot.
func (s *fragScorer) use(node *cache.NodeInfo) {
	if s.view != nil && s.view.node == node {
		return
	}
	e := s.views.get(node, s.dist)
	s.view, s.base = e.view, e.base
	s.after = s.after[:0]
	for range node.GPUs {
		s.after = append(s.after, math.NaN())
	}
	s.work = append(s.work[:0], s.view.free...)
	s.weights = s.weights[:0]
	for i := range s.dist.groups {
		s.weights = append(s.weights, s.dist.groups[i].weightFitting(s.view.cpu-s.res.MilliCPU))
	}
}

// cardDelta is the change in fragmentation (milli-GPU) of placing units on card g of node.
func (s *fragScorer) cardDelta(node *cache.NodeInfo, g int, units int64) float64 {
	s.use(node)
	if units != s.units {
		s.units = units
		for i := range s.after {
			s.after[i] = math.NaN()
		}
	}
	if h := s.view.class[g]; h != g && !math.IsNaN(s.after[h]) { // an identical card's result
		s.after[g] = s.after[h]
	}
	if math.IsNaN(s.after[g]) {
		s.after[g] = s.view.fragOneCard(s.dist, g, units, s.weights)
	}
	return (s.after[g] - s.base) * s.view.milliPerUnit
}

// planDelta is the change in fragmentation (milli-GPU) of applying plan to node.
func (s *fragScorer) planDelta(node *cache.NodeInfo, plan *Plan, req *contract.PodRequest) float64 {
	s.use(node)
	if len(plan.Slots) == 1 {
		return s.cardDelta(node, plan.Slots[0].GPU, plan.Slots[0].Units)
	}
	for _, g := range plan.UsedGPUs() {
		s.work[g] -= plan.Charge(req, g)
	}
	f := s.view.frag(s.dist, s.work, s.view.cpu-s.res.MilliCPU)
	copy(s.work, s.view.free)
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
	var idle int64
	for _, f := range s.view.free {
		idle += f
	}
	before := max(0, float64(idle)-float64(s.view.cpu)/k)
	after := max(0, float64(idle-units)-float64(s.view.cpu-s.res.MilliCPU)/k)
	return (after - before) * s.view.milliPerUnit
}

// sliverShare is the share of a card below which a card's free capacity counts as a sliver.
const sliverShare = 5 // a fifth

// slivers is the change (milli-GPU) in sliver capacity on the cards plan touches: a card's free
// units count when they are under a fifth of its capacity (and not zero), so creating a sliver
// costs its units and filling one in pays them back.
func (s *fragScorer) slivers(node *cache.NodeInfo, plan *Plan, req *contract.PodRequest) float64 {
	var change int64
	for i, slot := range plan.Slots {
		if !plan.FirstSlotOn(i) {
			continue
		}
		c, free := node.GPUs[slot.GPU].Capacity, s.view.free[slot.GPU]
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
	}
	r := 0.0
	for i, p := range s.pressure {
		if p > 0 && s.view.masks[i] != 0 {
			r += p
		}
	}
	return r
}

// sigmoidSteps are the breakpoints of FGD's integer score, ascending: the score of delta is
// 99 minus the number of steps below it (steps[i] = 1000*ln(100/(99-i) - 1)).
type sigmoidSteps [99]float64

func newSigmoidSteps() *sigmoidSteps {
	var s sigmoidSteps
	for i := range s {
		s[i] = 1000 * math.Log(100/float64(99-i)-1)
	}
	return &s
}

// score is FGD's integer node score for a fragmentation change delta in milli-GPU,
// floor(100 * sigmoid(-delta/1000)), found by binary search; within 1e-6 of a breakpoint the
// formula itself decides, so the result equals the formula's.
func (s *sigmoidSteps) score(delta float64) float64 {
	i, _ := slices.BinarySearch(s[:], delta)
	near := (i < len(s) && s[i]-delta < 1e-6) || (i > 0 && delta-s[i-1] < 1e-6)
	if near || i == 0 { // below the lowest step the float formula can reach 100
		return sigmoidScore(delta)
	}
	return float64(99 - i)
}

// sigmoidScore is floor(100 * sigmoid(-delta/1000)).
func sigmoidScore(delta float64) float64 {
	return math.Floor(100 / (1 + math.Exp(delta/1000)))
}
