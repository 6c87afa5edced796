package fgd

import "sync"

// cardMemo is what a fragScorer learned about one node snapshot for one pod shape (units per
// card, CPU request): per card, the fragmentation after the pod and its RankGPU value (NaN if
// unknown). Scorers of later pods copy it in and out under mu; it is allocated once per
// snapshot and overwritten, not replaced, so that scoring allocates nothing per node.
type cardMemo struct {
	mu              sync.Mutex
	units, milliCPU int64 // the shape after and rank hold; units is 0 before the first store
	after, rank     []float64
	picked          int // see fragScorer.picked
}

// load copies the memo's results into after and rank (as long as the node has cards) when it
// holds the shape's, and reports whether it did.
func (m *cardMemo) load(units, milliCPU int64, after, rank []float64) (picked int, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.units != units || m.milliCPU != milliCPU || len(m.after) != len(after) {
		return 0, false
	}
	copy(after, m.after)
	copy(rank, m.rank)
	return m.picked, true
}

// store replaces the memo's contents with the shape's results.
func (m *cardMemo) store(units, milliCPU int64, after, rank []float64, picked int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.after) != len(after) {
		vals := make([]float64, 2*len(after))
		m.after, m.rank = vals[:len(after):len(after)], vals[len(after):]
	}
	m.units, m.milliCPU, m.picked = units, milliCPU, picked
	copy(m.after, after)
	copy(m.rank, rank)
}
