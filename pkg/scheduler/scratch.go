package scheduler

import (
	"sync"

	"github.com/gpushare/gpushare/pkg/cache"
)

// passScratch is the working memory of one filter or prioritize pass over the candidate
// nodes. Passes take it from a pool, so that a pass over thousands of nodes allocates little
// more than its answer.
type passScratch struct {
	nodes    []*cache.NodeInfo
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
	s.nodes = resize(s.nodes, n)
	s.failures = resize(s.failures, n)
	s.raw = resize(s.raw, n)
	s.fits = resize(s.fits, n)
	return s
}

// put returns s to the pool, dropping its references to snapshots and failures so that the
// pool keeps no old snapshot alive.
func (p *scratchPool) put(s *passScratch) {
	clear(s.nodes)
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
