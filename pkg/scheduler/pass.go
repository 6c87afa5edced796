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
)

// A pass is a verb's walk over the candidate nodes: it sees them through the verb's nodeView,
// walks them in parallel chunks (parallelize) with its working memory from a pool
// (pass_buffers.go), and weighs the pod as placement does (podResources).

// nodeView is the cache's nodes as one verb sees them for one pod: where the verb's entry says
// holds apply, other pods' preemption holds count as used on their cards; the pod's own hold
// does not (holdSet.view).
type nodeView struct {
	cache cache.Cache
	// holds, if set, are overlaid on every node.
	holds *holdSet
	pod   types.UID
}

// nodeView is the view verb v has of the cache when it places pod.
func (e *Extender) nodeView(v verbID, pod types.UID) nodeView {
	view := nodeView{cache: e.cache, pod: pod}
	if verbTable()[v].holds {
		view.holds = e.holds
	}
	return view
}

// Visit calls fn with the snapshot of each of names as the view shows it (nil for a node the
// cache does not know), as cache.Cache.Visit does. The holds in force when it starts apply to
// the whole walk; with none (the usual case) it costs the walk nothing.
func (v nodeView) Visit(names []string, fn func(i int, node *placement.NodeInfo)) {
	if v.holds == nil || v.holds.count.Load() == 0 {
		v.cache.Visit(names, fn)
		return
	}
	v.cache.Visit(names, func(i int, node *placement.NodeInfo) { fn(i, v.holds.view(node, v.pod)) })
}

// Node is the snapshot of the node name as the view shows it; false when the cache does not
// know it.
func (v nodeView) Node(name string) (*placement.NodeInfo, bool) {
	node, ok := v.cache.Node(name)
	if v.holds != nil {
		node = v.holds.view(node, v.pod)
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
		d := placement.NewDecision(e.policy, req, res) // one per goroutine
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
