package placement

import (
	"math"
	"slices"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

// A one-card container on a node with topology goes where its policy puts it, except that among
// the cards the policy cannot tell apart from its choice (the same rank and the same free units:
// the node's state after the placement is then the same up to the cards' order, so the policy's
// node score and everything it decides later are too) it takes the card whose loss breaks the
// fewest well-connected free sets (least cardLoss), as HAMi steers one-card requests to the
// least-connected card. The fragmentation policy's choices are thus kept exactly.

// pickByFree is bestByFree, sparing well-connected free sets on a node with topology.
func pickByFree(node *NodeInfo, req *gpumem.PodRequest, units int64, emptiest bool) int {
	best := bestByFree(node, req, units, emptiest)
	t := node.topology()
	if t == nil || best < 0 {
		return best
	}
	free := node.UsableFree()
	return spareSets(node, t, units, best, func(g int) bool {
		return free[g] == free[best] && node.CardFits(g, units, req)
	})
}

// pickByRank is bestByRank, sparing well-connected free sets on a node with topology. It ranks
// each card once (a random policy's draws are not repeated), into the search scratch's keys.
func (sc *shortcuts) pickByRank(node *NodeInfo, req *gpumem.PodRequest, units int64) int {
	scorer, t := sc.scorer, node.topology()
	if t == nil {
		return bestByRank(node, req, units, scorer)
	}
	free, s := node.UsableFree(), sc.scratch()
	s.keys = slices.Grow(s.keys[:0], len(free))[:len(free)]
	r := s.keys
	best := -1
	for g := range free {
		r[g] = math.NaN() // never equal: a card that does not fit is no candidate
		if free[g] < units || !node.CardFits(g, units, req) {
			continue
		}
		if r[g] = scorer.RankGPU(node, g, units, req); best < 0 || r[g] < r[best] {
			best = g
		}
	}
	if best < 0 {
		return best
	}
	return spareSets(node, t, units, best, func(g int) bool { return r[g] == r[best] && free[g] == free[best] })
}

// spareSets returns, among card best and the cards same accepts, the one of least cardLoss for
// units, the lowest position on ties (best is the lowest of them, as the policy's choice is
// the first of equals).
func spareSets(node *NodeInfo, t *Topology, units int64, best int, same func(g int) bool) int {
	pick, least := best, cardLoss(node, t, best, units)
	for g := range node.GPUs {
		if least == 0 {
			break
		}
		if g == best || !same(g) {
			continue
		}
		if loss := cardLoss(node, t, g, units); loss < least { // best is the first of its group: ties keep the lowest position

			pick, least = g, loss
		}
	}
	return pick
}

// cardLoss is what putting units on card g costs the node's well-connected free sets: when g is
// a whole free card (all its units free, healthy), the sum of the scores of its links to the
// node's other whole free cards; else 0 (g is part used already, and no whole free set has it).
func cardLoss(node *NodeInfo, t *Topology, g int, units int64) int {
	free, caps := node.UsableFree(), node.Capacities()
	if units <= 0 || !wholeFree(free, caps, g) {
		return 0
	}
	loss := 0
	for h := range free {
		if h != g && wholeFree(free, caps, h) {
			loss += t.PairScore(g, h)
		}
	}
	return loss
}

// wholeFree reports whether card g is healthy and has all its units free.
func wholeFree(free, caps []int64, g int) bool { return caps[g] > 0 && free[g] == caps[g] }
