package scheduler

import (
	"math"

	v1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

// scoreNodes rates pod (asking req) on each of names with the policy, into buf.raw, and marks
// in buf.fits the nodes where it fits. Filter (when it chooses the node) and Prioritize both
// rate through it, so that a pod is never ranked two ways.
func (e *Extender) scoreNodes(pod *v1.Pod, req *gpumem.PodRequest, names []string, buf *passBuffers) {
	res := podResources(pod)
	raw, fits := buf.raw, buf.fits
	parallelize(len(names), func(lo, hi int) {
		var plan placement.Plan
		d := placement.NewDecision(e.policy, req, res) // one per goroutine
		e.cache.Visit(names[lo:hi], func(i int, node *placement.NodeInfo) {
			node = e.holds.view(node, pod.UID)
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
