package scheduler

import (
	"sync"

	"github.com/gpushare/gpushare/pkg/cache"
)

// fragViews memoises each node's fragView and fragmentation for its current snapshot and the
// current distribution: snapshots are immutable and replaced on every change, so a node's entry
// is valid while both pointers match. It holds one entry per node name. Safe for concurrent use.
type fragViews struct {
	byNode sync.Map   // node name → *fragEntry; read without locking on every node of a pass
	mu     sync.Mutex // guards supply
	supply *modelSupply
	models *modelMatcher
	steps  *sigmoidSteps
}

// fragEntry is a node's prepared view and its fragmentation before any new pod, immutable,
// and the memo of the last pod shape scored on it.
type fragEntry struct {
	dist *Distribution
	view *fragView
	base float64
	memo cardMemo
}

func newFragViews() *fragViews {
	return &fragViews{models: newModelMatcher(), steps: newSigmoidSteps(), supply: newModelSupply()}
}

// get returns node's view and fragmentation under d, computing them when node or d changed.
func (v *fragViews) get(node *cache.NodeInfo, d *Distribution) *fragEntry {
	if got, ok := v.byNode.Load(node.Name); ok {
		if e := got.(*fragEntry); e.view.node == node && e.dist == d {
			return e
		}
	}
	view := newFragView(node, d, v.models)
	e := &fragEntry{dist: d, view: view, base: view.frag(d, view.free, view.cpu)}
	v.byNode.Store(node.Name, e)
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

// sync makes the views match nodes, every node's current snapshot: the entries and supply of
// nodes not among them (deleted) go, and every node's cards count in the supply, scored yet or
// not.
func (v *fragViews) sync(nodes []*cache.NodeInfo) {
	live := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		live[n.Name] = true
	}
	v.byNode.Range(func(name, _ any) bool {
		if !live[name.(string)] {
			v.byNode.Delete(name)
		}
		return true
	})
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
