package scheduler

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/scheduler/preempt"
)

// Preempt answers kube-scheduler's preempt verb. For a pod asking gpu-mem the extender
// preempts itself over the proposed nodes (package preempt, through the verb's view of the
// cache), and answers only the victims without gpu-mem that kube-scheduler proposed on the node
// it chose (for CPU or memory), or none. For a pod without gpu-mem the proposal stands where
// the node is known.
func (e *Extender) Preempt(ctx context.Context, args *extenderv1.ExtenderPreemptionArgs) *extenderv1.ExtenderPreemptionResult {
	out := &extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{}}
	e.metrics.preempts.Add(1)
	if args.Pod == nil {
		return out
	}
	req, err := contract.ParseRequest(args.Pod, &e.names)
	if err != nil {
		return out
	}
	proposed := metaVictims(args)
	if req.Empty() {
		return &extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: proposed}
	}
	if !e.preempt.Enabled() {
		return e.keepFeasible(args.Pod, &req, proposed)
	}
	names := make([]string, 0, len(proposed))
	for name := range proposed {
		names = append(names, name)
	}
	plan, ok := e.preempt.Preempt(ctx, args.Pod, &req, names, e.nodeView(verbPreempt, args.Pod.UID))
	if !ok {
		return out
	}
	// The victims kube-scheduler proposed there that hold no gpu-mem were needed for other
	// resources: kube-scheduler deletes those.
	if mv := proposed[plan.Node]; mv != nil {
		node, _ := e.cache.Node(plan.Node)
		var other []*extenderv1.MetaPod
		for _, p := range mv.Pods {
			if !preempt.Charged(node, types.UID(p.UID)) {
				other = append(other, p)
			}
		}
		if len(other) > 0 {
			out.NodeNameToMetaVictims[plan.Node] = &extenderv1.MetaVictims{Pods: other, NumPDBViolations: 0}
		}
	}
	klog.FromContext(ctx).V(2).Info("Preempt", "pod", klog.KObj(args.Pod), "node", plan.Node, "victimsForKubeScheduler", len(out.NodeNameToMetaVictims))
	return out
}

// keepFeasible keeps, of kube-scheduler's proposal, the nodes where the pod's GPU memory fits
// once the proposed victims are gone (the answer with --gpu-preemption=false).
func (e *Extender) keepFeasible(pod *v1.Pod, req *contract.PodRequest, proposed map[string]*extenderv1.MetaVictims) *extenderv1.ExtenderPreemptionResult {
	out := &extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{}}
	d := placement.NewDecision(e.policy, req, podResources(pod))
	var plan placement.Plan
	for name, mv := range proposed {
		uids := make([]types.UID, 0, len(mv.Pods))
		for _, p := range mv.Pods {
			uids = append(uids, types.UID(p.UID))
		}
		if node, ok := e.cache.NodeWithout(name, uids); ok && d.Feasible(node, &plan) {
			out.NodeNameToMetaVictims[name] = mv
		}
	}
	return out
}

// metaVictims returns the victims by UID, whichever form the request used.
func metaVictims(args *extenderv1.ExtenderPreemptionArgs) map[string]*extenderv1.MetaVictims {
	if args.NodeNameToMetaVictims != nil {
		return args.NodeNameToMetaVictims
	}
	out := map[string]*extenderv1.MetaVictims{}
	for name, v := range args.NodeNameToVictims {
		mv := &extenderv1.MetaVictims{NumPDBViolations: v.NumPDBViolations}
		for _, p := range v.Pods {
			mv.Pods = append(mv.Pods, &extenderv1.MetaPod{UID: string(p.UID)})
		}
		out[name] = mv
	}
	return out
}
