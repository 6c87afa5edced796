package scheduler

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// Filter keeps the nodes on which every gpu-mem container of the pod has a card; with
// WithFilterChoosing, only the best of them. A node turned away gets the reason's summary
// (placement.FitError.Summary: the same words for every node that fails the same way, so that
// kube-scheduler's FailedScheduling event counts nodes per reason); the node's own detail is
// logged at V(4). It answers in NodeNames when asked with NodeNames
// (nodeCacheCapable) and in Nodes otherwise, and never returns a node it was not given.
func (e *Extender) Filter(ctx context.Context, args *extenderv1.ExtenderArgs) *extenderv1.ExtenderFilterResult {
	logger := klog.FromContext(ctx)
	names := argNodeNames(args)
	res := &extenderv1.ExtenderFilterResult{FailedNodes: extenderv1.FailedNodesMap{}, FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{}}
	if args.Pod == nil {
		res.Error = "filter: request has no pod"
		return res
	}
	req, err := contract.ParseRequest(args.Pod, &e.names)
	if err != nil {
		for _, n := range names {
			res.FailedAndUnresolvableNodes[n] = err.Error()
		}
		e.metrics.unfit.WithLabelValues(UnfitInvalidRequest).Add(float64(len(names)))
		return e.filterResult(args, res, nil)
	}
	buf := e.buffers.get(len(names))
	defer e.buffers.put(buf)
	knownUnfit := false // every node was planned on and the pod fits none
	if e.filterChooses && !req.Empty() {
		e.scoreNodes(args.Pod, &req, names, buf)
		if best, _, _ := topNode(args.Pod, names, buf.raw, buf.fits); best >= 0 {
			clear(buf.fits)
			buf.fits[best] = true
			logger.V(2).Info("Filtered", "pod", klog.KObj(args.Pod), "nodes", len(names), "chosen", names[best])
			e.metrics.filters.Add(1)
			return e.filterResult(args, res, buf.fits)
		}
		clear(buf.fits) // fits nowhere: say why below, without planning again
		knownUnfit = true
	}
	failures := buf.failures
	var sums *placement.Summaries // each node's own reason is only logged, at V(4)
	if !logger.V(4).Enabled() {
		sums = placement.NewSummaries(&req, e.names.UnitLabel())
	}
	if !req.Empty() {
		res := cache.PodResources(args.Pod)
		parallelize(len(names), func(lo, hi int) {
			var plan placement.Plan
			d := placement.NewDecision(e.policy, &req, res) // one per goroutine
			e.cache.Visit(names[lo:hi], func(i int, node *placement.NodeInfo) {
				if fe := e.check(d, node, &plan, knownUnfit, sums); fe != nil {
					failures[lo+i] = fe
				}
			})
		})
	}
	passed := buf.fits
	var unresolvable, full int
	for _, fe := range failures { // size the answer's maps once
		switch {
		case fe == nil:
		case fe.Unresolvable:
			unresolvable++
		default:
			full++
		}
	}
	res.FailedNodes, res.FailedAndUnresolvableNodes = make(extenderv1.FailedNodesMap, full), make(extenderv1.FailedNodesMap, unresolvable)
	for i, fe := range failures {
		switch {
		case fe == nil:
			passed[i] = true
			continue
		case fe.Unresolvable:
			res.FailedAndUnresolvableNodes[names[i]] = fe.Summary
		default:
			res.FailedNodes[names[i]] = fe.Summary
		}
		logger.V(4).Info("Node filtered out", "pod", klog.KObj(args.Pod), "node", names[i], "reason", fe.Reason)
	}
	logger.V(2).Info("Filtered", "pod", klog.KObj(args.Pod), "nodes", len(names), "passed", countTrue(passed))
	if unresolvable > 0 {
		e.metrics.unfit.WithLabelValues(UnfitUnresolvable).Add(float64(unresolvable))
	}
	if full > 0 {
		e.metrics.unfit.WithLabelValues(UnfitNoFreeBlock).Add(float64(full))
	}
	e.metrics.filters.Add(1)
	return e.filterResult(args, res, passed)
}

// unknownNode is the reason of a candidate the extender does not know.
var unknownNode = &placement.FitError{
	Reason:       "GPU memory: node is not a GPU-sharing node known to the extender",
	Summary:      "GPU memory: node is not a GPU-sharing node known to the extender",
	Unresolvable: true,
}

// check says why d's pod does not fit node (nil when it fits); plan is scratch space. With
// unfit, the caller already knows the pod does not fit and only the reason is wanted. The
// reason comes from sums (the summary filter answers, shared by the nodes that fail alike), or
// with the node's own detail when sums is nil.
func (e *Extender) check(d *placement.Decision, node *placement.NodeInfo, plan *placement.Plan, unfit bool, sums *placement.Summaries) *placement.FitError {
	switch {
	case node == nil:
		return unknownNode
	case !unfit && d.Feasible(node, plan):
		return nil
	case sums == nil:
		return placement.Explain(node, d.Request(), e.names.UnitLabel())
	}
	return sums.Explain(node)
}

// filterResult fills the passing nodes (passed[i] for the request's i-th node) in the form the
// request used.
func (e *Extender) filterResult(args *extenderv1.ExtenderArgs, res *extenderv1.ExtenderFilterResult, passed []bool) *extenderv1.ExtenderFilterResult {
	if args.NodeNames != nil {
		out := make([]string, 0, countTrue(passed))
		for i, n := range *args.NodeNames {
			if i < len(passed) && passed[i] {
				out = append(out, n)
			}
		}
		res.NodeNames = &out
		return res
	}
	list := &v1.NodeList{}
	if args.Nodes != nil {
		for i := range args.Nodes.Items {
			if i < len(passed) && passed[i] {
				list.Items = append(list.Items, args.Nodes.Items[i])
			}
		}
	}
	res.Nodes = list
	return res
}

func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// argNodeNames lists the candidate nodes of a request, whichever form it used.
func argNodeNames(args *extenderv1.ExtenderArgs) []string {
	if args.NodeNames != nil {
		return *args.NodeNames
	}
	if args.Nodes == nil {
		return nil
	}
	out := make([]string, len(args.Nodes.Items))
	for i := range args.Nodes.Items {
		out[i] = args.Nodes.Items[i].Name
	}
	return out
}
