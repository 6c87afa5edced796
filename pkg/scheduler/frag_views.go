package scheduler

import (
	"sync"

	"github.com/gpushare/gpushare/pkg/cache"
)

// fragViews memoises each node's fragView and fragmentation for its current snapshot and the
// current distribution: snapshots are immutable and replaced on every change, so a node's entry
// is valid while both pointers match. Entries live on the snapshots; fragViews keeps the model
// supply. Safe for concurrent use.
type fragViews struct {
	mu     sync.Mutex // guards supply
	supply *modelSupply
	models *modelMatcher
	steps  *sigmoidSteps
}

// fragEntry is a node's prepared view and its fragmentation before any new pod, immutable,
// and the memo of the last pod shape scored on it. It is kept with the node's snapshot
// (NodeInfo.SetDerived), so it goes when the snapshot does.
type fragEntry struct {
	owner *fragViews
	dist  *Distribution
	view  *fragView
	base  float64
	memo  cardMemo
}

func newFragViews() *fragViews {
	return &fragViews{models: newModelMatcher(), steps: newSigmoidSteps(), supply: newModelSupply()}
}

// get returns node's view and fragmentation under d, computing them when node or d changed.
func (v *fragViews) get(node *cache.NodeInfo, d *Distribution) *fragEntry {
	if e, ok := node.Derived().(*fragEntry); ok && e.owner == v && e.dist == d && e.view.node == node {
		return e
	}
	view := newFragView(node, d, v.models)
	e := &fragEntry{owner: v, dist: d, view: view, base: view.frag(d, view.free, view.cpu)}
	node.SetDerived(e)
	v.mu.Lock()
	v.supply.set(node)
	v.mu.Unlock()
	return e
}

// pressure is the model pressure of d's constrained groups under the current supply (see
// modelSupply.pressure).
func (v *fragViews) pressure(d *Distribution) []float64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.supply.pressure(d, v.models)
}

// sync makes the model supply match nodes, every node's current snapshot: nodes not among
// them (deleted) go, and every node's cards count, scored yet or not. (Views go with their
// snapshots.)
func (v *fragViews) sync(nodes []*cache.NodeInfo) {
	live := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		live[n.Name] = true
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	for name := range v.supply.byNode {
		if !live[name] {
			v.supply.remove(name)
		}
	}
	for _, n := range nodes {
		v.supply.set(n)
	}
}
