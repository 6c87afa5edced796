package scheduler

import (
	"math"
	"runtime"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/scheduler/preempt"
)

// A pass is a verb's walk over the candidate nodes: it sees them through the verb's nodeView,
// walks them in parallel chunks (parallelize) with its working memory from a pool
// (passBuffers), and weighs the pod as placement does (podResources).

// overlay is what a verb's view lays over the cache's snapshots: the preemption holds
// (preempt.Holds).
type overlay interface {
	// Empty reports whether there is nothing to lay over (one atomic load).
	Empty() bool
	// View is node as the pod of uid sees it; node itself when nothing changes it.
	View(node *placement.NodeInfo, pod types.UID) *placement.NodeInfo
}

// nodeView is the cache's nodes as one verb sees them for one pod: where the verb's entry says
// holds apply, other pods' preemption holds count as used on their cards; the pod's own hold
// does not (preempt.Holds.View). It is also preemption's view (preempt.View).
type nodeView struct {
	cache cache.Cache
	// holds, if set, are overlaid on every node.
	holds overlay
	pod   types.UID
}

var _ preempt.View = nodeView{}

// nodeView is the view verb v has of the cache when it places pod.
func (e *Extender) nodeView(v verbID, pod types.UID) nodeView {
	view := nodeView{cache: e.cache, pod: pod}
	if e.verbs[v].holds {
		view.holds = e.holds
	}
	return view
}

// Visit calls fn with the snapshot of each of names as the view shows it (nil for a node the
// cache does not know), as cache.Cache.Visit does. The holds in force when it starts apply to
// the whole walk; with none (the usual case) it costs the walk nothing.
func (v nodeView) Visit(names []string, fn func(i int, node *placement.NodeInfo)) {
	if v.holds == nil || v.holds.Empty() {
		v.cache.Visit(names, fn)
		return
	}
	v.cache.Visit(names, func(i int, node *placement.NodeInfo) { fn(i, v.holds.View(node, v.pod)) })
}

// VisitAll calls fn with the snapshot of every node the cache knows, as the view shows it.
func (v nodeView) VisitAll(fn func(node *placement.NodeInfo)) {
	for _, node := range v.cache.Nodes() {
		if v.holds != nil {
			node = v.holds.View(node, v.pod)
		}
		fn(node)
	}
}

// Node is the snapshot of the node name as the view shows it; false when the cache does not
// know it.
func (v nodeView) Node(name string) (*placement.NodeInfo, bool) {
	node, ok := v.cache.Node(name)
	if v.holds != nil {
		node = v.holds.View(node, v.pod)
	}
	return node, ok
}

// scoreNodes rates pod (asking req) on each of names as view shows them with the policy, into
// buf.raw, and marks in buf.fits the nodes where it fits. Filter (when it chooses the node) and
// Prioritize both rate through it, so that a pod is never ranked two ways.
func (e *Extender) scoreNodes(view nodeView, pod *v1.Pod, req *gpumem.PodRequest, names []string, buf *passBuffers) {
	res := podResources(pod)
	raw, fits := buf.raw, buf.fits
	parallelize(len(names), func(lo, hi int) {
		var plan placement.Plan
		d := placement.NewDecision(e.placer, req, res) // one per goroutine
		view.Visit(names[lo:hi], func(i int, node *placement.NodeInfo) {
			if node != nil {
				raw[lo+i], fits[lo+i] = d.Score(node, &plan)
			}
		})
	})
}

// topNode is the index in names of the node the pod goes to: among the nodes that fit, the
// best raw score, and among scores equal to it the first in the pod's placement.TieOrder; -1
// when the pod fits none. lo and hi are the lowest and highest scores of the nodes that fit.
func topNode(pod *v1.Pod, names []string, raw []float64, fits []bool) (best int, lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for i := range raw {
		if fits[i] {
			lo, hi = min(lo, raw[i]), max(hi, raw[i])
		}
	}
	best = -1
	var bestOrder uint64
	for i := range raw {
		if !fits[i] || raw[i] < hi-scoreEps {
			continue
		}
		if order := placement.TieOrder(pod.Namespace, pod.Name, names[i]); best < 0 || order < bestOrder {
			best, bestOrder = i, order
		}
	}
	return best, lo, hi
}

// scoreEps is how close two scores must be to count as equal.
const scoreEps = 1e-12

// podResources is the pod's CPU and memory requests as placement weighs them.
func podResources(pod *v1.Pod) placement.PodResources {
	cpu, mem := contract.PodCPUMemory(pod)
	return placement.PodResources{MilliCPU: cpu, Memory: mem}
}

// minChunk is the fewest nodes worth a goroutine of their own.
const minChunk = 256

// parallelize calls work on consecutive chunks of [0, n), on up to GOMAXPROCS goroutines, and
// returns when all are done. work must only write to what its own chunk owns.
func parallelize(n int, work func(lo, hi int)) {
	workers := min(runtime.GOMAXPROCS(0), (n+minChunk-1)/minChunk)
	if workers <= 1 {
		work(0, n)
		return
	}
	var wg sync.WaitGroup
	size := (n + workers - 1) / workers
	for lo := size; lo < n; lo += size {
		wg.Add(1)
		go func(lo, hi int) {
			defer wg.Done()
			work(lo, hi)
		}(lo, min(lo+size, n))
	}
	work(0, min(size, n)) // the first chunk on the caller's goroutine
	wg.Wait()
}

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
