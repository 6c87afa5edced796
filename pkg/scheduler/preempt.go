package scheduler

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// Preempt keeps, of kube-scheduler's candidate nodes and victims, the nodes where the pod's
// GPU memory fits once the victims are gone. Victims are kept as proposed.
func (e *Extender) Preempt(ctx context.Context, args *extenderv1.ExtenderPreemptionArgs) *extenderv1.ExtenderPreemptionResult {
	out := &extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{}}
	if args.Pod == nil {
		return out
	}
	req, err := contract.ParseRequest(args.Pod, &e.names)
	if err != nil {
		return out
	}
	d := placement.NewDecision(e.policy, &req, cache.PodResources(args.Pod))
	var plan placement.Plan
	for name, mv := range metaVictims(args) {
		if req.Empty() {
			out.NodeNameToMetaVictims[name] = mv
			continue
		}
		uids := make([]types.UID, 0, len(mv.Pods))
		for _, p := range mv.Pods {
			uids = append(uids, types.UID(p.UID))
		}
		node, ok := e.cache.NodeWithout(name, uids)
		if !ok {
			continue
		}
		if d.Feasible(node, &plan) {
			out.NodeNameToMetaVictims[name] = mv
		}
	}
	e.metrics.preempts.Add(1)
	klog.FromContext(ctx).V(2).Info("Preempt", "pod", klog.KObj(args.Pod), "candidates", len(out.NodeNameToMetaVictims))
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
