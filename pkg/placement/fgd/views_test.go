package fgd

import (
	"sync"
	"testing"
)

// TestEntryTable: a node ID's slot is the same slot however the table grows, concurrently;
// keep empties the slots of IDs not kept.
func TestEntryTable(t *testing.T) {
	var table entryTable
	ids := []int{0, 1, entryChunkSize - 1, entryChunkSize, 3*entryChunkSize + 7}
	entries := make([]*fragEntry, len(ids))
	for i, id := range ids {
		entries[i] = &fragEntry{}
		table.slot(id).Store(entries[i])
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range 2 * entryChunkSize {
				table.slot(id + w*entryChunkSize) // grows the table while others read
			}
		}()
	}
	wg.Wait()
	for i, id := range ids {
		if got := table.slot(id).Load(); got != entries[i] {
			t.Errorf("slot %d holds %p, want %p", id, got, entries[i])
		}
	}
	table.keep(map[int]bool{1: true, entryChunkSize: true})
	for i, id := range ids {
		kept := id == 1 || id == entryChunkSize
		if got := table.slot(id).Load(); (got != nil) != kept || (kept && got != entries[i]) {
			t.Errorf("after keep, slot %d holds %p (kept: %v)", id, got, kept)
		}
	}
}
