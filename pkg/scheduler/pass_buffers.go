package scheduler

import (
	"sync"

	"github.com/gpushare/gpushare/pkg/placement"
)

// passBuffers is the working memory of one filter or prioritize pass over the candidate
// nodes: per node, why the pod does not fit, its raw score and whether it fits. Passes take it
// from a pool, so that a pass over thousands of nodes allocates little more than its answer.
type passBuffers struct {
	failures []*placement.FitError
	raw      []float64
	fits     []bool
}

// bufferPool hands out passBuffers values; the zero value is ready to use.
type bufferPool struct{ pool sync.Pool }

// get returns buffers sized for n nodes, every slot zeroed.
func (p *bufferPool) get(n int) *passBuffers {
	b, _ := p.pool.Get().(*passBuffers)
	if b == nil {
		b = &passBuffers{}
	}
	b.failures = resize(b.failures, n)
	b.raw = resize(b.raw, n)
	b.fits = resize(b.fits, n)
	return b
}

// put returns b to the pool, dropping its references to failures.
func (p *bufferPool) put(b *passBuffers) {
	clear(b.failures)
	p.pool.Put(b)
}

// resize returns a zeroed slice of length n, reusing s's storage when it is large enough.
func resize[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	s = s[:n]
	clear(s)
	return s
}
