package placement

import "slices"

// setSearchBudget bounds the sets of cards BestSet compares exactly: every set of an 8-card
// node (at most C(8, 4) = 70) and of a 12-card one (C(12, 6) = 924); beyond it the search is
// greedy (setFinder.greedy), so that a 64-card node costs a few thousand link reads per
// decision, not billions.
const setSearchBudget = 1024

// BestSet returns the k cards of cands (positions of the node's cards) whose SetScore is
// highest, and that score. Among sets of equal score it returns the one first in cands' order
// (compared card by card), so that a caller who lists the cards in its policy's order keeps
// that order among equally connected sets. The set comes in cands' order. It returns nil when
// cands has fewer than k cards. Beyond setSearchBudget sets the search is greedy, and the set
// it returns may score less than the best.
func (t *Topology) BestSet(cands []int, k int) ([]int, int) {
	if k > len(cands) || k <= 0 {
		return nil, 0
	}
	var f setFinder
	sorted := append([]int(nil), cands...)
	score := f.front(t, sorted, k)
	return sorted[:k], score
}

// setFinder is the scratch of BestSet's search, kept between searches (the planner's, node
// after node) so that a search allocates nothing once its slices have grown.
type setFinder struct {
	t         *Topology
	cands     []int
	cur, best []int // indices into cands
	bestScore int
	gain      []int // the greedy search's gain per index of cands
	rest      []int
}

// front moves the best set of k cards of cands (as BestSet chooses it) to cands[:k], each part
// keeping its order, and returns its score. len(cands) >= k >= 1.
func (f *setFinder) front(t *Topology, cands []int, k int) int {
	f.t, f.cands = t, cands
	f.cur, f.best, f.bestScore = f.cur[:0], f.best[:0], -1
	if combinationsAtMost(len(cands), k, setSearchBudget) {
		f.exact(0, k, 0)
	} else {
		f.greedy(k)
	}
	f.rest = f.rest[:0]
	chosen, next := 0, 0
	for i, g := range cands { // best holds ascending indices: a stable partition
		if next < len(f.best) && f.best[next] == i {
			cands[chosen] = g
			chosen++
			next++
			continue
		}
		f.rest = append(f.rest, g)
	}
	copy(cands[chosen:], f.rest)
	return f.bestScore
}

// exact extends cur (of score score) with need more indices from `from` on, in lexicographic
// order, keeping the first set of the highest score.
func (f *setFinder) exact(from, need, score int) {
	if need == 0 {
		if score > f.bestScore {
			f.bestScore = score
			f.best = append(f.best[:0], f.cur...)
		}
		return
	}
	for i := from; i <= len(f.cands)-need; i++ {
		add := 0
		for _, j := range f.cur {
			add += f.t.PairScore(f.cands[i], f.cands[j])
		}
		f.cur = append(f.cur, i)
		f.exact(i+1, need-1, score+add)
		f.cur = f.cur[:len(f.cur)-1]
	}
}

// greedy starts a set from each card in turn and adds the card that joins it best (the first
// on ties) until it has k; it keeps the first set of the highest score, indices ascending.
func (f *setFinder) greedy(k int) {
	m := len(f.cands)
	for start := range m {
		f.gain = slices.Grow(f.gain[:0], m)[:m]
		clear(f.gain)
		f.cur = append(f.cur[:0], start)
		f.take(start)
		score := 0
		for len(f.cur) < k {
			next := -1
			for i := range m {
				if f.gain[i] >= 0 && (next < 0 || f.gain[i] > f.gain[next]) {
					next = i
				}
			}
			score += f.gain[next]
			f.cur = append(f.cur, next)
			f.take(next)
		}
		if score > f.bestScore {
			f.bestScore = score
			f.best = append(f.best[:0], f.cur...)
		}
	}
	slices.Sort(f.best)
}

// take marks index i taken (gain -1) and adds its links to the gains of the others.
func (f *setFinder) take(i int) {
	f.gain[i] = -1
	for j := range f.gain {
		if f.gain[j] >= 0 {
			f.gain[j] += f.t.PairScore(f.cands[i], f.cands[j])
		}
	}
}

// combinationsAtMost reports whether C(n, k) <= limit.
func combinationsAtMost(n, k, limit int) bool {
	k = min(k, n-k)
	c := 1
	for i := 1; i <= k; i++ {
		c = c * (n - k + i) / i // exact: c is C(n-k+i, i) after the division
		if c > limit {
			return false
		}
	}
	return true
}
