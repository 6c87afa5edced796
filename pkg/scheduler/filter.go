package scheduler

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
)

// Filter keeps the nodes on which every gpu-mem container of the pod has a card. It answers in
// NodeNames when asked with NodeNames (nodeCacheCapable) and in Nodes otherwise, and never
// returns a node it was not given.
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
		return e.filterResult(args, res, nil)
	}
	sc := e.scratch.get(len(names))
	defer e.scratch.put(sc)
	failures := sc.failures
	if !req.Empty() {
		parallelize(len(names), func(lo, hi int) {
			var plan Plan
			e.cache.Visit(names[lo:hi], func(i int, node *cache.NodeInfo) {
				if fe := e.check(node, &req, &plan); fe != nil {
					failures[lo+i] = fe
				}
			})
		})
	}
	passed := sc.fits
	for i, fe := range failures {
		switch {
		case fe == nil:
			passed[i] = true
		case fe.Unresolvable:
			res.FailedAndUnresolvableNodes[names[i]] = fe.Reason
		default:
			res.FailedNodes[names[i]] = fe.Reason
		}
		if fe != nil {
			logger.V(4).Info("Node filtered out", "pod", klog.KObj(args.Pod), "node", names[i], "reason", fe.Reason)
		}
	}
	logger.V(2).Info("Filtered", "pod", klog.KObj(args.Pod), "nodes", len(names), "passed", countTrue(passed))
	e.metrics.filters.Add(1)
	return e.filterResult(args, res, passed)
}

// check says why req does not fit node (nil when it fits); plan is scratch space.
func (e *Extender) check(node *cache.NodeInfo, req *contract.PodRequest, plan *Plan) *FitError {
	switch {
	case node == nil:
		return &FitError{Reason: "GPU memory: node is not a GPU-sharing node known to the extender", Unresolvable: true}
	case len(req.Containers) == 1 && req.Containers[0].GPUs == 1 && len(req.Models) == 0:
		if node.MaxFree >= req.Containers[0].Units {
			return nil // one card, any model: the largest free block decides
		}
	case planInto(node, req, e.policy, plan):
		return nil
	}
	return Explain(node, req, e.names.UnitLabel())
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
