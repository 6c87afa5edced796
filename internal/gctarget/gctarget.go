// Package gctarget sets the Go garbage collector's target (GOGC) as a percentage of the live
// heap with a floor in bytes: the heap may always grow by at least that much between
// collections. A percentage alone makes a small heap collect very often: at 20 MB live and 50 %,
// every 10 MB allocated, so a busy process with little state spends more CPU collecting than
// one with much state. The floor does not change large heaps, whose percentage already gives
// more.
package gctarget

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// maxPercent bounds the percentage the floor may ask for (a nearly empty heap).
const maxPercent = 10_000

// Target keeps the collector's percentage at Percent, or higher when Percent of the live heap is
// less than MinHeadroom bytes. It reads the live heap after every collection.
type Target struct {
	// Percent is the target as Go's GOGC: heap growth between collections, in percent of the
	// live heap.
	Percent int
	// MinHeadroom is the least the heap may grow between collections, in bytes; 0 is Percent
	// alone.
	MinHeadroom uint64

	// setPercent and liveHeap are debug.SetGCPercent and the runtime's live heap; tests replace
	// them.
	setPercent func(int) int
	liveHeap   func() uint64

	mu      sync.Mutex
	current int
	stopped bool
}

// Start sets the collector's percentage and, with a MinHeadroom, adjusts it after every
// collection until Stop.
func (t *Target) Start() {
	if t.setPercent == nil {
		t.setPercent = debug.SetGCPercent
	}
	if t.liveHeap == nil {
		t.liveHeap = liveHeap
	}
	t.mu.Lock()
	t.current = t.Percent
	t.setPercent(t.Percent)
	t.mu.Unlock()
	if t.MinHeadroom > 0 {
		t.arm()
	}
}

// Stop ends the adjustments; the percentage stays where it was.
func (t *Target) Stop() {
	t.mu.Lock()
	t.stopped = true
	t.mu.Unlock()
}

// sentinel is an object only a finalizer refers to: the finalizer runs once a collection found
// it unreachable, which is how Target learns that a collection ended. It holds a pointer so
// that it is not a tiny allocation, whose finalizer may never run.
type sentinel struct{ t *Target }

// arm allocates a sentinel whose finalizer adjusts the percentage and arms the next one.
func (t *Target) arm() {
	runtime.SetFinalizer(&sentinel{t: t}, func(s *sentinel) {
		if s.t.adjust() {
			s.t.arm()
		}
	})
}

// adjust sets the percentage for the live heap now; false once stopped.
func (t *Target) adjust() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return false
	}
	want := PercentFor(t.Percent, t.MinHeadroom, t.liveHeap())
	// Small changes are not worth a call: the live heap moves a little every cycle.
	if d := want - t.current; d > t.current/16 || -d > t.current/16 {
		t.current = want
		t.setPercent(want)
	}
	return true
}

// PercentFor is the percentage that lets a heap of live bytes grow by percent of itself, and by
// at least minHeadroom bytes.
func PercentFor(percent int, minHeadroom, live uint64) int {
	if minHeadroom == 0 || live == 0 { // live 0: the runtime did not say
		return percent
	}
	floor := (minHeadroom*100 + live - 1) / live
	if floor > maxPercent {
		return maxPercent
	}
	return max(percent, int(floor))
}

// liveHeap is the heap the last collection found live, in bytes.
func liveHeap() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}
