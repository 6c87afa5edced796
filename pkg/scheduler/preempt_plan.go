package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// Preemptions are planned one at a time. Kube-scheduler's preempt verb and filter's background
// preemptions arrive together in a burst of preemptors; planned side by side, they all saw the
// same cheapest card and its victims, and wrote hold after hold on it for memory already held
// for the first (10 holds on one card for the same two victims within 160 ms in one probe: every
// preemptor then waited for its hold to run out). So planning, the dry-run evictions and the
// writing of the hold happen under e.planning: each plan sees the holds of the plans before it
// (holdSet.view counts them as used, the pods they evict count as leaving: holdSet.leaving).
// The evictions themselves come after, outside it.

// preemptGPU frees a card for pod on one of names, if the pod may preempt and some card can be
// freed: it returns the plan it carried out. A pod with a hold in force, or a preemption in
// progress, preempts nothing more. Only the leader preempts.
func (e *Extender) preemptGPU(ctx context.Context, pod *v1.Pod, req *contract.PodRequest, names []string) (placement.PreemptionPlan, bool) {
	logger := klog.FromContext(ctx)
	if !e.Leading() || len(names) == 0 {
		return placement.PreemptionPlan{}, false
	}
	if h, ok := e.holds.of(pod.UID); ok {
		logger.V(4).Info("Preemption already holds a card for the pod", "pod", klog.KObj(pod), "node", h.Node, "gpu", h.GPU)
		return placement.PreemptionPlan{}, false
	}
	if _, busy := e.preempting.LoadOrStore(pod.UID, struct{}{}); busy {
		return placement.PreemptionPlan{}, false
	}
	defer e.preempting.Delete(pod.UID)
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		e.preemptionFailed(pod, "its preemptionPolicy is Never")
		return placement.PreemptionPlan{}, false
	}
	if placement.PreemptionUnsupported(req) {
		e.preemptionFailed(pod, "only pods of one container on one card preempt")
		return placement.PreemptionPlan{}, false
	}
	plan, rec, ok := e.planAndHold(ctx, pod, req, names)
	if !ok {
		return placement.PreemptionPlan{}, false
	}
	if err := e.evictVictims(ctx, pod, &plan, &rec); err != nil {
		logger.Error(err, "Preemption failed", "pod", klog.KObj(pod), "node", plan.Node, "gpu", plan.Index)
	}
	return plan, true
}

// planAndHold, under e.planning, chooses the card pod is to get over names and writes the hold
// on the pod: a card where it fits now if there is one (memory freed since kube-scheduler
// looked), else the cheapest preemption whose victims the Eviction API lets go (a dry run;
// PodDisruptionBudgets). It returns the plan and its hold, in force on return.
func (e *Extender) planAndHold(ctx context.Context, pod *v1.Pod, req *contract.PodRequest, names []string) (placement.PreemptionPlan, HoldRecord, bool) {
	logger := klog.FromContext(ctx)
	select {
	case e.planning <- struct{}{}:
	case <-ctx.Done():
		logger.V(2).Info("Preemption not planned: gave up waiting for the preemptions planned before", "pod", klog.KObj(pod), "err", ctx.Err())
		return placement.PreemptionPlan{}, HoldRecord{}, false
	}
	defer func() { <-e.planning }()
	priority := cache.PodPriority(pod)
	protected := map[types.UID]string{} // victims a PodDisruptionBudget protects, and why
	plan, ok := e.fitsNow(pod, req, names)
	if !ok {
		if node, elsewhere := e.fitsElsewhere(pod, req, names); elsewhere && e.mayDefer(pod.UID) {
			logger.V(2).Info("Preemption put off: the pod fits now on a node kube-scheduler did not offer; it retries", "pod", klog.KObj(pod), "node", node)
			return placement.PreemptionPlan{}, HoldRecord{}, false
		}
	}
	for range maxPreemptionTries {
		if !ok {
			plan, ok = e.planPreemption(pod, req, priority, names, protected)
		}
		if !ok {
			why := "no pod of lower priority frees enough of one card on any candidate node"
			if len(protected) > 0 {
				why += "; evictions refused: " + joinReasons(protected)
			}
			e.preemptionFailed(pod, why)
			return placement.PreemptionPlan{}, HoldRecord{}, false
		}
		blocked, err := e.checkEvictions(ctx, plan.Victims)
		if err != nil {
			logger.Error(err, "Preemption: checking the evictions failed", "pod", klog.KObj(pod), "node", plan.Node)
			return placement.PreemptionPlan{}, HoldRecord{}, false
		}
		if len(blocked) > 0 {
			for uid, why := range blocked {
				protected[uid] = why
			}
			ok = false
			continue
		}
		rec, err := e.writeHold(ctx, pod, &plan)
		if err != nil {
			logger.Error(err, "Preemption failed", "pod", klog.KObj(pod), "node", plan.Node, "gpu", plan.Index)
			return placement.PreemptionPlan{}, HoldRecord{}, false
		}
		return plan, rec, true
	}
	e.preemptionFailed(pod, "evictions refused: "+joinReasons(protected))
	return placement.PreemptionPlan{}, HoldRecord{}, false
}

// fitsNow is a plan without victims on the card of names where pod fits now as it sees them
// (other pods' holds count), the fullest such card: memory some pod or preemption freed since
// kube-scheduler looked. Preempting elsewhere would evict for nothing. Caller holds e.planning.
func (e *Extender) fitsNow(pod *v1.Pod, req *contract.PodRequest, names []string) (placement.PreemptionPlan, bool) {
	return e.fullestFit(pod, req, e.cache.Lookup(names), func(string) bool { return true })
}

// fitsElsewhere reports whether pod fits now, as it sees them, on a node the extender knows that
// is not one of names and passes Bind's checks (checkBind: CPU, memory, node selector, affinity,
// tolerations). kube-scheduler chose names from its own snapshot, which may still count there a
// pod the extender has seen go: the pod had better retry than evict.
func (e *Extender) fitsElsewhere(pod *v1.Pod, req *contract.PodRequest, names []string) (string, bool) {
	offered := make(map[string]bool, len(names))
	for _, n := range names {
		offered[n] = true
	}
	eligible := func(name string) bool { return !offered[name] && e.checkBind(pod, req, name) == nil }
	plan, ok := e.fullestFit(pod, req, e.cache.Nodes(), eligible)
	return plan.Node, ok
}

// fullestFit is a plan without victims on the fullest card of nodes (nil entries skipped) where
// pod fits now as it sees them, on a node eligible admits (asked only of nodes with such a card).
func (e *Extender) fullestFit(pod *v1.Pod, req *contract.PodRequest, nodes []*placement.NodeInfo, eligible func(string) bool) (placement.PreemptionPlan, bool) {
	need := req.Containers[0].Units
	var best placement.PreemptionPlan
	bestFree := int64(-1)
	for _, node := range nodes {
		if node == nil {
			continue
		}
		view := e.holds.view(node, pod.UID)
		admitted := false
		for g := range view.GPUs {
			free := view.GPUs[g].Free()
			if !view.CardFits(g, need, req) || (bestFree >= 0 && free >= bestFree) {
				continue
			}
			if !admitted && !eligible(node.Name) {
				break
			}
			admitted = true
			best, bestFree = placement.PreemptionPlan{Node: node.Name, GPU: g, Index: view.GPUs[g].Index, Need: need}, free
		}
	}
	return best, bestFree >= 0
}

// mayDefer reports whether a preemption of the pod of uid may be put off now: for
// preemptionDeferFor after the first time it was, then not before preemptionDeferral has passed,
// so that a node kube-scheduler keeps from the pod for a reason Bind does not check (inter-pod
// affinity, ports, volumes) delays its preemption a few seconds, not for good.
func (e *Extender) mayDefer(uid types.UID) bool {
	now := e.now()
	first, ok := e.preemptionsDeferred.Load(uid)
	if !ok || now.Sub(first.(time.Time)) >= preemptionDeferral {
		e.preemptionsDeferred.Store(uid, now)
		return true
	}
	return now.Sub(first.(time.Time)) < preemptionDeferFor
}

// preemptionDeferFor is how long a pod's preemption may be put off while it fits on a node
// kube-scheduler did not offer: a few of kube-scheduler's retries, which see that node once its
// snapshot has caught up (milliseconds in a burst).
const preemptionDeferFor = 5 * time.Second

// preemptionDeferral is how long after a pod's preemption was first put off it may be again.
const preemptionDeferral = 30 * time.Second

// planPreemption is the cheapest plan over names, as pod sees them: other pods' holds count as
// used, and the pods evicted for them as leaving. Caller holds e.planning.
func (e *Extender) planPreemption(pod *v1.Pod, req *contract.PodRequest, priority int32, names []string, protected map[types.UID]string) (placement.PreemptionPlan, bool) {
	leaving := e.holds.leaving()
	info := func(p *placement.PodInfo) placement.VictimInfo {
		_, blocked := protected[p.UID]
		// An assumed pod is being bound right now: not a victim (its Binding may land).
		// One of ProtectedPriority or above: the extender's account may not delete it.
		return placement.VictimInfo{Priority: p.Priority, Terminating: p.Terminating || leaving[p.UID],
			Protected: blocked || p.State == placement.PodAssumed || p.Priority >= ProtectedPriority}
	}
	var best placement.PreemptionPlan
	found := false
	for _, name := range names {
		node, ok := e.cache.Node(name)
		if !ok {
			continue
		}
		plan, ok := placement.PlanPreemption(e.holds.view(node, pod.UID), req, priority, info)
		if ok && (!found || plan.Compare(&best) < 0) {
			best, found = plan, true
		}
	}
	return best, found
}

// writeHold writes plan's hold on pod, signed, and puts it in force. It lasts the victims'
// longest grace period plus DefaultHoldSlack, at most MaxHold. Caller holds e.planning.
func (e *Extender) writeHold(ctx context.Context, pod *v1.Pod, plan *placement.PreemptionPlan) (HoldRecord, error) {
	grace := int64(v1.DefaultTerminationGracePeriodSeconds)
	names := make([]string, 0, len(plan.Victims))
	uids := make([]types.UID, 0, len(plan.Victims))
	for _, v := range plan.Victims {
		names, uids = append(names, v.Key()), append(uids, v.UID)
		if obj, ok := e.podObject(ctx, v.Namespace, v.Name, v.UID); ok && obj.Spec.TerminationGracePeriodSeconds != nil {
			grace = max(grace, *obj.Spec.TerminationGracePeriodSeconds)
		}
	}
	rec := HoldRecord{Node: plan.Node, GPU: plan.Index, Units: plan.Need, Victims: names,
		Until: e.now().Add(min(MaxHold, time.Duration(grace)*time.Second+DefaultHoldSlack)).UTC().Truncate(time.Second)}
	rec.MAC = holdMAC(e.holdKey, pod.UID, &rec)
	raw, err := json.Marshal(rec)
	if err != nil {
		return rec, fmt.Errorf("encode the hold: %w", err)
	}
	// the fence, as before a Binding
	if err := e.patchFenced(ctx, pod.Namespace, pod.Name, pod.UID, map[string]any{e.names.PreemptionAnnotation: string(raw)}); err != nil {
		return rec, fmt.Errorf("write the hold on %s: %w", klog.KObj(pod), err)
	}
	e.holds.add(hold{HoldRecord: rec, pod: pod.UID, namespace: pod.Namespace, name: pod.Name, victims: uids})
	return rec, nil
}
