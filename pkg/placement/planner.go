package placement

import (
	"cmp"
	"slices"
	"sort"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

// searchBudget bounds the backtracking over single-card containers of a multi-container pod.
const searchBudget = 2048

// PlanPod finds the scorer's preferred placement of req on node; ok is false when there is none
// (Explain says why). Containers are placed largest first on the cards the scorer ranks first;
// if later containers do not fit, earlier single-card choices are revisited, so a placement is
// found whenever one exists within the search budget. On a node with topology
// (NodeInfo.Topology), a container on several cards takes the best-connected set of cards that
// fit (Topology.BestSet; the scorer's order among equally connected sets), and a one-card
// container spares well-connected free sets where the scorer is indifferent
// (topology_single.go).
func PlanPod(node *NodeInfo, req *gpumem.PodRequest, scorer Scorer) (*Plan, bool) {
	p := &Plan{}
	if !PlanInto(node, req, scorer, p) {
		return nil, false
	}
	return p, true
}

// PlanInto is PlanPod writing into p instead of allocating a Plan, for callers that plan a pod
// on many nodes. p's previous contents are overwritten; a one-slot plan lives in p's own
// storage, so keep the *Plan, not a copy of it.
func PlanInto(node *NodeInfo, req *gpumem.PodRequest, scorer Scorer, p *Plan) bool {
	sc := newShortcuts(scorer)
	return sc.planInto(node, req, p)
}

// shortcuts is a scorer with its optional planning extensions found once, so that a pass over
// many nodes does not look them up per node.
type shortcuts struct {
	scorer Scorer
	free   FreeOrderer // nil unless the scorer is one
	picker CardPicker  // nil unless the scorer is one
	search *search     // scratch of multi-card plans, reused node after node
}

func newShortcuts(scorer Scorer) shortcuts {
	s := shortcuts{scorer: scorer}
	s.free, _ = scorer.(FreeOrderer)
	s.picker, _ = scorer.(CardPicker)
	return s
}

// planInto is PlanInto with the shortcuts found.
func (sc *shortcuts) planInto(node *NodeInfo, req *gpumem.PodRequest, p *Plan) bool {
	scorer := sc.scorer
	if fits, single := sc.planSingle(node, req, p); single {
		return fits
	}
	s := sc.scratch()
	s.reset(node, req, scorer)
	if !s.apps(0) || !s.inits() {
		return false
	}
	p.Slots = append(p.Slots[:0], s.slots...) // p's own storage: the plan outlives the scratch's next use
	return true
}

// scratch is the search scratch, made on first use: a decision over nodes that need none (one-
// card pods on nodes without topology) allocates none.
func (sc *shortcuts) scratch() *search {
	if sc.search == nil {
		sc.search = &search{}
	}
	return sc.search
}

// planSingle handles the common pod, one container on one card, without allocating: the slot
// goes into p's inline storage. single is false when the pod is not of that shape.
func (sc *shortcuts) planSingle(node *NodeInfo, req *gpumem.PodRequest, p *Plan) (fits, single bool) {
	if len(req.Containers) != 1 || req.Containers[0].GPUs != 1 {
		return false, false
	}
	units := req.Containers[0].Units
	if node.MaxFree < units {
		return false, true
	}
	var best int
	switch {
	case sc.free != nil:
		best = pickByFree(node, req, units, sc.free.EmptiestFirst())
	case sc.picker != nil:
		var known bool
		if best, known = sc.picker.PickedCard(node, units, req); !known {
			best = sc.pickByRank(node, req, units)
			sc.picker.CardPicked(node, units, req, best)
		}
	default:
		best = sc.pickByRank(node, req, units)
	}
	if best < 0 {
		return false, true
	}
	p.one[0] = Slot{Container: 0, GPU: best, Units: units}
	p.Slots = p.one[:]
	return true, true
}

// bestByRank is the position of the card the scorer ranks first among those where a one-card
// container of units fits (the lowest index on ties), or -1.
func bestByRank(node *NodeInfo, req *gpumem.PodRequest, units int64, scorer Scorer) int {
	best, bestRank := -1, 0.0
	for g, free := range node.UsableFree() {
		if free < units || !node.CardFits(g, units, req) { // free first: most cards fail there, without a call
			continue
		}
		if r := scorer.RankGPU(node, g, units, req); best < 0 || r < bestRank {
			best, bestRank = g, r
		}
	}
	return best
}

// bestByFree is bestByRank for a FreeOrderer: the fitting card with the fewest free units (the
// most when emptiest), the lowest index on ties, without a call per card.
func bestByFree(node *NodeInfo, req *gpumem.PodRequest, units int64, emptiest bool) int {
	sign := int64(1)
	if emptiest {
		sign = -1
	}
	best, bestKey := -1, int64(0)
	for g, free := range node.UsableFree() {
		if free < units || !node.CardFits(g, units, req) { // free first: most cards fail there, without a call
			continue
		}
		if k := sign * free; best < 0 || k < bestKey {
			best, bestKey = g, k
		}
	}
	return best
}

// search is the state of one multi-container placement. Its slices are kept between
// placements (reset), so that planning on node after node allocates nothing once they have
// grown.
type search struct {
	node   *NodeInfo
	req    *gpumem.PodRequest
	scorer Scorer
	order  []int   // app containers, largest per-card ask first
	free   []int64 // free units per GPU position after the slots so far
	slots  []Slot
	budget int
	keys   []float64  // scratch for candidates (and pickByRank): rank per GPU position
	cands  [][]int    // candidates' lists, one per depth of apps (and one for inits)
	sets   *setFinder // best-connected sets on nodes with topology, made on first use
}

// reset starts the placement of req on node.
func (s *search) reset(node *NodeInfo, req *gpumem.PodRequest, scorer Scorer) {
	s.node, s.req, s.scorer, s.budget = node, req, scorer, searchBudget
	s.free = slices.Grow(s.free[:0], len(node.GPUs))[:len(node.GPUs)]
	for g, free := range node.UsableFree() { // the node's own slice: no pass over its GPUInfo
		s.free[g] = 0
		if free > 0 && (len(req.Models) == 0 || node.CardFits(g, 0, req)) {
			s.free[g] = free
		}
	}
	s.slots = s.slots[:0]
	s.order = s.order[:0]
	for i, c := range req.Containers {
		if !c.Init {
			s.order = append(s.order, i)
		}
	}
	slices.SortStableFunc(s.order, func(a, b int) int { // largest per-card ask first
		return cmp.Compare(req.Containers[b].PerGPU(), req.Containers[a].PerGPU())
	})
}

// candidates lists GPU positions with at least units free, in the scorer's order, in the
// list kept for depth (a deeper call does not overwrite it). With fewer than need of them, the
// list is returned unranked: the caller gives up on it.
func (s *search) candidates(depth int, units int64, free []int64, need int) []int {
	for len(s.cands) <= depth {
		s.cands = append(s.cands, nil)
	}
	out := s.cands[depth][:0]
	for g := range free {
		if free[g] >= units && s.node.CardFits(g, 0, s.req) {
			out = append(out, g)
		}
	}
	s.cands[depth] = out
	if len(out) < need { // no ranking for a container that fits nowhere on the node
		return out
	}
	if len(s.keys) < len(free) {
		s.keys = make([]float64, len(free))
	}
	for _, g := range out {
		s.keys[g] = s.scorer.RankGPU(s.node, g, units, s.req)
	}
	slices.SortStableFunc(out, func(a, b int) int {
		switch ka, kb := s.keys[a], s.keys[b]; {
		case ka < kb:
			return -1
		case kb < ka:
			return 1
		}
		return 0
	})
	return out
}

// apps places app containers order[i:], backtracking over single-card choices.
func (s *search) apps(i int) bool {
	if i == len(s.order) {
		return true
	}
	if s.budget--; s.budget < 0 {
		return false
	}
	ci := s.order[i]
	c := s.req.Containers[ci]
	cands := s.candidates(i, c.PerGPU(), s.free, c.GPUs)
	if len(cands) < c.GPUs {
		return false
	}
	if c.GPUs > 1 { // several cards: the best-ranked ones, or the best-connected set that fits
		if t := s.node.topology(); t != nil {
			if s.sets == nil {
				s.sets = &setFinder{}
			}
			s.sets.front(t, cands, c.GPUs) // cands is this depth's own list: reordering it is safe
		}
		return s.try(i, ci, c.PerGPU(), cands[:c.GPUs])
	}
	for k := range cands {
		if s.try(i, ci, c.PerGPU(), cands[k:k+1]) {
			return true
		}
	}
	return false
}

// try places container ci on gpus and continues with order[i+1:], undoing on failure.
func (s *search) try(i, ci int, units int64, gpus []int) bool {
	n := len(s.slots)
	for _, g := range gpus {
		s.free[g] -= units
		s.slots = append(s.slots, Slot{Container: ci, GPU: g, Units: units})
	}
	if s.apps(i + 1) {
		return true
	}
	for _, g := range gpus {
		s.free[g] += units
	}
	s.slots = s.slots[:n]
	return false
}

// inits places each init container. Init containers run one at a time before the app
// containers, so one fits a card when the card's free memory before the pod covers it; cards
// the pod's app containers already hold at least that much of cost nothing and come first.
func (s *search) inits() bool {
	plan := &Plan{Slots: s.slots}
	for ci, c := range s.req.Containers {
		if !c.Init {
			continue
		}
		base := make([]int64, len(s.node.GPUs))
		for g := range base {
			if s.node.CardFits(g, 0, s.req) {
				base[g] = s.node.GPUs[g].Free()
			}
		}
		cands := s.candidates(len(s.order), c.PerGPU(), base, c.GPUs) // below every depth of apps
		if len(cands) < c.GPUs {
			return false
		}
		sort.SliceStable(cands, func(a, b int) bool {
			return plan.Charge(s.req, cands[a]) >= c.PerGPU() && plan.Charge(s.req, cands[b]) < c.PerGPU()
		})
		for _, g := range cands[:c.GPUs] {
			plan.Slots = append(plan.Slots, Slot{Container: ci, GPU: g, Units: c.PerGPU()})
		}
	}
	s.slots = plan.Slots
	return true
}
