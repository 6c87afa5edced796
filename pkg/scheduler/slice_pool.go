package scheduler

import (
	"sync"
	"unsafe"
)

// maxPooledBytes is the largest buffer a slicePool keeps: a request with tens of thousands of
// candidate names is rare, and its buffers are left to the collector.
const maxPooledBytes = 4 << 20

// slicePool hands out slices for what a call at thousands of candidates reads and writes by
// the hundred kilobytes: request bodies, candidate names, encoded answers. Reusing them keeps
// that off the garbage collector, whose cycles over the cache's large heap slow the calls they
// overlap. The zero value is ready to use; safe for concurrent use.
type slicePool[T any] struct{ pool sync.Pool }

// get returns an empty slice, with the capacity of one returned earlier when there is one.
func (p *slicePool[T]) get() []T {
	if s, ok := p.pool.Get().(*[]T); ok {
		return (*s)[:0]
	}
	return nil
}

// put returns s for reuse, its elements zeroed (a pooled slice keeps nothing alive); the
// caller must not use s afterwards.
func (p *slicePool[T]) put(s []T) {
	var zero T
	if cap(s) == 0 || uintptr(cap(s))*unsafe.Sizeof(zero) > maxPooledBytes {
		return
	}
	clear(s)
	p.pool.Put(&s)
}
