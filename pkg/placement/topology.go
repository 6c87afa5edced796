package placement

import "math"

// maxPairScore is the largest link score a Topology holds; larger ones are clamped to it.
const maxPairScore = math.MaxUint16

// Topology is what joins a node's cards, as placement weighs it: for every two cards, the score
// of their link on HAMi's scale (contract.Link.Score: 10 across CPU sockets, 20 within one, 30
// through a host bridge, 40 through several PCIe switches, 50 through one, 100 per NVLink
// link), by positions of NodeInfo.GPUs. A set of cards is as well connected as the sum of its
// pairs' scores (SetScore). A Topology is immutable once built: a node's snapshots share one,
// and nodes without topology have none (NodeInfo.Topology is nil).
type Topology struct {
	n      int
	scores []uint16 // scores[i*n+j] = scores[j*n+i]; the diagonal is 0
}

// NewTopology is the topology of n cards whose link between positions i and j scores
// score(i, j); it is asked for i > j only, and the matrix mirrors it. Scores outside
// 0..65535 are clamped.
func NewTopology(n int, score func(i, j int) int) *Topology {
	t := &Topology{n: n, scores: make([]uint16, n*n)}
	for i := range n {
		for j := range i {
			s := uint16(min(max(score(i, j), 0), maxPairScore))
			t.scores[i*n+j], t.scores[j*n+i] = s, s
		}
	}
	return t
}

// Cards is how many cards the topology covers.
func (t *Topology) Cards() int { return t.n }

// PairScore is the score of the link between the cards at positions i and j (0 when i == j).
func (t *Topology) PairScore(i, j int) int { return int(t.scores[i*t.n+j]) }

// SetScore is the sum of PairScore over every two cards of set (positions).
func (t *Topology) SetScore(set []int) int {
	s := 0
	for a, i := range set {
		for _, j := range set[:a] {
			s += t.PairScore(i, j)
		}
	}
	return s
}

// Equal reports whether t and o join the same number of cards alike (both nil counts).
func (t *Topology) Equal(o *Topology) bool {
	if t == nil || o == nil {
		return t == o
	}
	if t.n != o.n {
		return false
	}
	for i, s := range t.scores {
		if o.scores[i] != s {
			return false
		}
	}
	return true
}
