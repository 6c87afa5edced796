package fgd

import (
	"sync"
	"sync/atomic"

	"github.com/gpushare/gpushare/pkg/placement"
)

// fragViews memoises each node's fragView and fragmentation for its current snapshot and the
// current distribution: snapshots are immutable and replaced on every change, so a node's entry
// is valid while both pointers match. Entries are kept in a table indexed by the node's ID, one
// per node, replaced when the node's snapshot changes; fragViews also keeps the model supply.
// Safe for concurrent use.
type fragViews struct {
	table  entryTable
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
func (v *fragViews) get(node *placement.NodeInfo, d *Distribution) *fragEntry {
	slot := v.table.slot(node.ID)
	if e := slot.Load(); e != nil && e.dist == d && e.view.node == node {
		return e
	}
	view := newFragView(node, d, v.models)
	e := &fragEntry{dist: d, view: view, base: view.frag(d, view.free, view.cpu, nil)}
	slot.Store(e)
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
// them (deleted) go, and every node's cards count, scored yet or not. Entries of deleted nodes
// are dropped from the table. With a distribution d, every node's entry is then prepared under
// it, so that the first calls after a start (or after a new distribution, once a sync comes)
// find them ready instead of building thousands in the scheduler's cycle.
func (v *fragViews) sync(nodes []*placement.NodeInfo, d *Distribution) {
	live := make(map[string]bool, len(nodes))
	ids := make(map[int]bool, len(nodes))
	for _, n := range nodes {
		live[n.Name], ids[n.ID] = true, true
	}
	v.table.keep(ids)
	v.mu.Lock()
	for name := range v.supply.byNode {
		if !live[name] {
			v.supply.remove(name)
		}
	}
	for _, n := range nodes {
		v.supply.set(n)
	}
	v.mu.Unlock()
	if d == nil {
		return
	}
	for _, n := range nodes {
		v.get(n, d) // a no-op for an entry already current
	}
}

// entryTable holds one entry slot per node ID. Slots never move: the table grows by adding
// chunks, so a reader holds a slot without a lock. Safe for concurrent use.
type entryTable struct {
	mu     sync.Mutex // serialises growth
	chunks atomic.Pointer[[]*entryChunk]
}

// entryChunkSize is how many node IDs one chunk of the table covers.
const entryChunkSize = 1024

type entryChunk [entryChunkSize]atomic.Pointer[fragEntry]

// slot returns the slot of node ID id, growing the table when needed.
func (t *entryTable) slot(id int) *atomic.Pointer[fragEntry] {
	c := id / entryChunkSize
	if cs := t.chunks.Load(); cs != nil && c < len(*cs) {
		return &(*cs)[c][id%entryChunkSize]
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var grown []*entryChunk
	if cs := t.chunks.Load(); cs != nil {
		grown = *cs
	}
	for len(grown) <= c {
		grown = append(grown[:len(grown):len(grown)], &entryChunk{})
	}
	t.chunks.Store(&grown)
	return &grown[c][id%entryChunkSize]
}

// keep empties the slots of the IDs not in ids.
func (t *entryTable) keep(ids map[int]bool) {
	cs := t.chunks.Load()
	if cs == nil {
		return
	}
	for c, chunk := range *cs {
		for i := range chunk {
			if !ids[c*entryChunkSize+i] {
				chunk[i].Store(nil)
			}
		}
	}
}
