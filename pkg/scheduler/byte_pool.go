package scheduler

import "sync"

// maxPooledBytes is the largest buffer a bytePool keeps: a request with tens of thousands of
// candidate names is rare, and its buffer is left to the collector.
const maxPooledBytes = 4 << 20

// bytePool hands out byte buffers for request bodies and encoded answers. At thousands of
// candidates each filter or prioritize call reads and writes hundreds of kilobytes; reusing
// the buffers keeps that off the garbage collector, whose cycles over the cache's large heap
// slow the calls they overlap. The zero value is ready to use; safe for concurrent use.
type bytePool struct{ pool sync.Pool }

// get returns an empty buffer, with the capacity of one returned earlier when there is one.
func (p *bytePool) get() []byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return nil
}

// put returns b for reuse; the caller must not use b afterwards.
func (p *bytePool) put(b []byte) {
	if cap(b) == 0 || cap(b) > maxPooledBytes {
		return
	}
	p.pool.Put(&b)
}
