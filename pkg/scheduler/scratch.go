package scheduler

import (
	"sync"
)

// passScratch is the working memory of one filter or prioritize pass over the candidate
// nodes. Passes take it from a pool, so that a pass over thousands of nodes allocates little
// more than its answer.
type passScratch struct {
	failures []*FitError
	raw      []float64
	fits     []bool
}

// scratchPool hands out passScratch values; the zero value is ready to use.
type scratchPool struct{ pool sync.Pool }

// get returns scratch sized for n nodes, every slot zeroed.
func (p *scratchPool) get(n int) *passScratch {
	s, _ := p.pool.Get().(*passScratch)
	if s == nil {
		s = &passScratch{}
	}
	s.failures = resize(s.failures, n)
	s.raw = resize(s.raw, n)
	s.fits = resize(s.fits, n)
	return s
}

// put returns s to the pool, dropping its references to failures.
func (p *scratchPool) put(s *passScratch) {
	clear(s.failures)
	p.pool.Put(s)
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
