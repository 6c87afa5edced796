package fgd

import "sync"

// memoShapes is how many pod shapes a node's memo holds. Consecutive pods seldom share a shape
// (a burst of 1-8 GiB pods has eight), and fgd-online replaces its distribution, and with it
// every node's entry and memo, at most every 64 binds: a memo of one shape missed for most pods, a
// memo of a few keeps a node's results for the shapes of the moment.
const memoShapes = 8

// cardMemo is what fragScorers learned about one node snapshot for the last memoShapes pod
// shapes (units per card, CPU request): per card, the fragmentation after the pod and its
// RankGPU value (NaN if unknown). Scorers of later pods copy a shape's results in and out
// under mu; a shape's storage is allocated once per snapshot and overwritten, not replaced, so
// that scoring allocates little per node.
type cardMemo struct {
	mu     sync.Mutex
	shapes [memoShapes]memoShape
	tick   uint64 // counts loads and stores, for memoShape.used
}

// memoShape is one shape's results in a cardMemo.
type memoShape struct {
	units, milliCPU int64 // the shape after and rank hold; units is 0 while the slot is unused
	after, rank     []float64
	picked          int    // see fragScorer.picked
	used            uint64 // cardMemo.tick at the shape's last load or store
}

// find is the slot holding the shape's results for n cards, nil if none. Caller holds m.mu.
func (m *cardMemo) find(units, milliCPU int64, n int) *memoShape {
	for i := range m.shapes {
		if s := &m.shapes[i]; s.units == units && s.milliCPU == milliCPU && len(s.after) == n {
			return s
		}
	}
	return nil
}

// load copies the memo's results for the shape into after and rank (as long as the node has
// cards) when it holds them, and reports whether it did.
func (m *cardMemo) load(units, milliCPU int64, after, rank []float64) (picked int, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.find(units, milliCPU, len(after))
	if s == nil {
		return 0, false
	}
	m.tick++
	s.used = m.tick
	copy(after, s.after)
	copy(rank, s.rank)
	return s.picked, true
}

// store records the shape's results, in its own slot or, for a new shape, in the slot used
// least recently.
func (m *cardMemo) store(units, milliCPU int64, after, rank []float64, picked int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.find(units, milliCPU, len(after))
	if s == nil {
		s = &m.shapes[0]
		for i := 1; i < memoShapes; i++ {
			if m.shapes[i].used < s.used {
				s = &m.shapes[i]
			}
		}
	}
	m.tick++
	s.used = m.tick
	if len(s.after) != len(after) {
		vals := make([]float64, 2*len(after))
		s.after, s.rank = vals[:len(after):len(after)], vals[len(after):]
	}
	s.units, s.milliCPU, s.picked = units, milliCPU, picked
	copy(s.after, after)
	copy(s.rank, rank)
}
