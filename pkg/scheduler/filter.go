package scheduler

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

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
	passed := make(map[string]bool, len(names))
	for i, node := range e.cache.Lookup(names) {
		name := names[i]
		switch {
		case req.Empty():
			passed[name] = true
		case node == nil:
			res.FailedAndUnresolvableNodes[name] = "GPU memory: node is not a GPU-sharing node known to the extender"
		default:
			if _, ok := PlanPod(node, &req, e.policy); ok {
				passed[name] = true
				continue
			}
			fe := Explain(node, &req, e.names.UnitLabel())
			if fe.Unresolvable {
				res.FailedAndUnresolvableNodes[name] = fe.Reason
			} else {
				res.FailedNodes[name] = fe.Reason
			}
			logger.V(4).Info("Node filtered out", "pod", klog.KObj(args.Pod), "node", name, "reason", fe.Reason)
		}
	}
	logger.V(2).Info("Filtered", "pod", klog.KObj(args.Pod), "nodes", len(names), "passed", len(passed))
	e.metrics.filters.Add(1)
	return e.filterResult(args, res, passed)
}

// filterResult fills the passing nodes in the form the request used.
func (e *Extender) filterResult(args *extenderv1.ExtenderArgs, res *extenderv1.ExtenderFilterResult, passed map[string]bool) *extenderv1.ExtenderFilterResult {
	if args.NodeNames != nil {
		out := make([]string, 0, len(passed))
		for _, n := range *args.NodeNames {
			if passed[n] {
				out = append(out, n)
			}
		}
		res.NodeNames = &out
		return res
	}
	list := &v1.NodeList{}
	if args.Nodes != nil {
		for i := range args.Nodes.Items {
			if passed[args.Nodes.Items[i].Name] {
				list.Items = append(list.Items, args.Nodes.Items[i])
			}
		}
	}
	res.Nodes = list
	return res
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
