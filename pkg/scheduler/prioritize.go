package scheduler

import (
	"context"
	"fmt"
	"math"

	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
)

// Prioritize scores the candidate nodes with the policy. The node(s) with the policy's best
// score get MaxExtenderPriority, alone, so that the extender's coarse 0..10 range never ties
// them with a slightly worse node; the others are scaled to 0..MaxExtenderPriority-1. Nodes
// where the pod does not fit, and every node for a pod that asks no gpu-mem, get 0.
func (e *Extender) Prioritize(ctx context.Context, args *extenderv1.ExtenderArgs) (extenderv1.HostPriorityList, error) {
	if args.Pod == nil {
		return nil, fmt.Errorf("prioritize: request has no pod")
	}
	names := argNodeNames(args)
	out := make(extenderv1.HostPriorityList, len(names))
	for i, n := range names {
		out[i].Host = n
	}
	req, err := contract.ParseRequest(args.Pod, &e.names)
	if err != nil || req.Empty() {
		return out, nil // filter already reported the error
	}
	cpu, mem := cache.PodRequests(args.Pod)
	res := PodResources{MilliCPU: cpu, Memory: mem}
	raw, fits := make([]float64, len(names)), make([]bool, len(names))
	nodes := e.cache.Lookup(names)
	parallelize(len(nodes), func(lo, hi int) {
		var plan Plan
		policy := ForPod(e.policy, res) // one per goroutine
		for i := lo; i < hi; i++ {
			if nodes[i] != nil && planInto(nodes[i], &req, policy, &plan) {
				raw[i], fits[i] = policy.ScoreNode(nodes[i], &plan, &req), true
			}
		}
	})
	lo, hi := math.Inf(1), math.Inf(-1)
	for i := range raw {
		if fits[i] {
			lo, hi = min(lo, raw[i]), max(hi, raw[i])
		}
	}
	for i := range out {
		if fits[i] {
			out[i].Score = scale(raw[i], lo, hi)
		}
	}
	e.metrics.prioritizes.Add(1)
	klog.FromContext(ctx).V(2).Info("Prioritized", "pod", klog.KObj(args.Pod), "policy", e.policy.Name(), "nodes", len(names))
	return out, nil
}

// scale maps the best score hi to MaxExtenderPriority and the rest of [lo, hi) to
// 0..MaxExtenderPriority-1.
func scale(v, lo, hi float64) int64 {
	const eps = 1e-12
	if v >= hi-eps {
		return extenderv1.MaxExtenderPriority
	}
	top := float64(extenderv1.MaxExtenderPriority - 1)
	return min(int64(top), int64(math.Round((v-lo)/(hi-lo)*top)))
}
