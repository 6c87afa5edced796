package preempt

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
// writing of the hold happen under p.planning: each plan sees the holds of the plans before it
// (the view counts them as used, and the pods they evict count as leaving: Holds.leaving).
// The evictions themselves come after, outside it.

// maxTries bounds how often a preemption plans again after a PodDisruptionBudget refused one
// of its victims.
const maxTries = 5

// Preempt frees a card for pod on one of names, as view shows them, if preemption is on, the
// pod may preempt and some card can be freed: it returns the plan it carried out. A pod with a
// hold in force, or a preemption in progress, preempts nothing more. Only the leader preempts.
func (p *Preemptor) Preempt(ctx context.Context, pod *v1.Pod, req *contract.PodRequest, names []string, view View) (placement.PreemptionPlan, bool) {
	logger := klog.FromContext(ctx)
	if !p.enabled || !p.fence.Leading() || len(names) == 0 {
		return placement.PreemptionPlan{}, false
	}
	if h, ok := p.holds.of(pod.UID); ok {
		logger.V(4).Info("Preemption already holds a card for the pod", "pod", klog.KObj(pod), "node", h.Node, "gpu", h.GPU)
		return placement.PreemptionPlan{}, false
	}
	if _, busy := p.preempting.LoadOrStore(pod.UID, struct{}{}); busy {
		return placement.PreemptionPlan{}, false
	}
	defer p.preempting.Delete(pod.UID)
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		p.failed(pod, "its preemptionPolicy is Never")
		return placement.PreemptionPlan{}, false
	}
	if placement.PreemptionUnsupported(req) {
		p.failed(pod, "only pods of one container on one card preempt")
		return placement.PreemptionPlan{}, false
	}
	plan, rec, ok := p.planAndHold(ctx, pod, req, names, view)
	if !ok {
		return placement.PreemptionPlan{}, false
	}
	if err := p.evictVictims(ctx, pod, &plan, &rec); err != nil {
		logger.Error(err, "Preemption failed", "pod", klog.KObj(pod), "node", plan.Node, "gpu", plan.Index)
	}
	return plan, true
}

// planAndHold, under p.planning, chooses the card pod is to get over names and writes the hold
// on the pod: a card where it fits now if there is one (memory freed since kube-scheduler
// looked), else the cheapest preemption whose victims the Eviction API lets go (a dry run;
// PodDisruptionBudgets). It returns the plan and its hold, in force on return.
func (p *Preemptor) planAndHold(ctx context.Context, pod *v1.Pod, req *contract.PodRequest, names []string, view View) (placement.PreemptionPlan, HoldRecord, bool) {
	logger := klog.FromContext(ctx)
	select {
	case p.planning <- struct{}{}:
	case <-ctx.Done():
		logger.V(2).Info("Preemption not planned: gave up waiting for the preemptions planned before", "pod", klog.KObj(pod), "err", ctx.Err())
		return placement.PreemptionPlan{}, HoldRecord{}, false
	}
	defer func() { <-p.planning }()
	priority := cache.PodPriority(pod)
	protected := map[types.UID]string{} // victims a PodDisruptionBudget protects, and why
	plan, ok := fitsNow(req, names, view)
	if !ok {
		if node, elsewhere := p.fitsElsewhere(pod, req, names, view); elsewhere && p.mayDefer(pod.UID) {
			logger.V(2).Info("Preemption put off: the pod fits now on a node kube-scheduler did not offer; it retries", "pod", klog.KObj(pod), "node", node)
			return placement.PreemptionPlan{}, HoldRecord{}, false
		}
	}
	for range maxTries {
		if !ok {
			plan, ok = p.plan(req, priority, names, view, protected)
		}
		if !ok {
			why := "no pod of lower priority frees enough of one card on any candidate node"
			if len(protected) > 0 {
				why += "; evictions refused: " + joinReasons(protected)
			}
			p.failed(pod, why)
			return placement.PreemptionPlan{}, HoldRecord{}, false
		}
		blocked, err := p.checkEvictions(ctx, plan.Victims)
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
		rec, err := p.writeHold(ctx, pod, &plan)
		if err != nil {
			logger.Error(err, "Preemption failed", "pod", klog.KObj(pod), "node", plan.Node, "gpu", plan.Index)
			return placement.PreemptionPlan{}, HoldRecord{}, false
		}
		return plan, rec, true
	}
	p.failed(pod, "evictions refused: "+joinReasons(protected))
	return placement.PreemptionPlan{}, HoldRecord{}, false
}

// fitsNow is a plan without victims on the card of names where the pod (asking req) fits now
// as view shows them (other pods' holds count), the fullest such card: memory some pod or
// preemption freed since kube-scheduler looked. Preempting elsewhere would evict for nothing.
// Caller holds p.planning.
func fitsNow(req *contract.PodRequest, names []string, view View) (placement.PreemptionPlan, bool) {
	walk := func(fn func(*placement.NodeInfo)) {
		view.Visit(names, func(_ int, node *placement.NodeInfo) { fn(node) })
	}
	return fullestFit(req, walk, func(*placement.NodeInfo) bool { return true })
}

// fitsElsewhere reports whether pod fits now, as view shows them, on a node the extender knows
// that is not one of names and that the extender's bind admits (p.admits). kube-scheduler chose
// names from its own snapshot, which may still count there a pod the extender has seen go: the
// pod had better retry than evict.
func (p *Preemptor) fitsElsewhere(pod *v1.Pod, req *contract.PodRequest, names []string, view View) (string, bool) {
	offered := make(map[string]bool, len(names))
	for _, n := range names {
		offered[n] = true
	}
	eligible := func(node *placement.NodeInfo) bool { return !offered[node.Name] && p.admits(pod, req, node) }
	plan, ok := fullestFit(req, view.VisitAll, eligible)
	return plan.Node, ok
}

// fullestFit is a plan without victims on the fullest card of the nodes walk visits (nil
// entries skipped) where the pod asking req fits now, on a node eligible admits (asked only of
// nodes with such a card).
func fullestFit(req *contract.PodRequest, walk func(func(*placement.NodeInfo)), eligible func(*placement.NodeInfo) bool) (placement.PreemptionPlan, bool) {
	need := req.Containers[0].Units
	var best placement.PreemptionPlan
	bestFree := int64(-1)
	walk(func(node *placement.NodeInfo) {
		if node == nil {
			return
		}
		admitted := false
		for g := range node.GPUs {
			free := node.GPUs[g].Free()
			if !node.CardFits(g, need, req) || (bestFree >= 0 && free >= bestFree) {
				continue
			}
			if !admitted && !eligible(node) {
				break
			}
			admitted = true
			best, bestFree = placement.PreemptionPlan{Node: node.Name, GPU: g, Index: node.GPUs[g].Index, Need: need}, free
		}
	})
	return best, bestFree >= 0
}

// mayDefer reports whether a preemption of the pod of uid may be put off now: for deferFor
// after the first time it was, then not before deferral has passed, so that a node
// kube-scheduler keeps from the pod for a reason Bind does not check (inter-pod affinity,
// ports, volumes) delays its preemption a few seconds, not for good.
func (p *Preemptor) mayDefer(uid types.UID) bool {
	now := p.now()
	first, ok := p.deferred.Load(uid)
	if !ok || now.Sub(first.(time.Time)) >= deferral {
		p.deferred.Store(uid, now)
		return true
	}
	return now.Sub(first.(time.Time)) < deferFor
}

// deferFor is how long a pod's preemption may be put off while it fits on a node
// kube-scheduler did not offer: a few of kube-scheduler's retries, which see that node once its
// snapshot has caught up (milliseconds in a burst).
const deferFor = 5 * time.Second

// deferral is how long after a pod's preemption was first put off it may be again.
const deferral = 30 * time.Second

// plan is the cheapest plan over names, as view shows them: other pods' holds count as used,
// and the pods evicted for them as leaving. Caller holds p.planning.
func (p *Preemptor) plan(req *contract.PodRequest, priority int32, names []string, view View, protected map[types.UID]string) (placement.PreemptionPlan, bool) {
	leaving := p.holds.leaving()
	info := func(pi *placement.PodInfo) placement.VictimInfo {
		_, blocked := protected[pi.UID]
		// An assumed pod is being bound right now: not a victim (its Binding may land).
		// One of ProtectedPriority or above: the extender's account may not delete it.
		return placement.VictimInfo{Priority: pi.Priority, Terminating: pi.Terminating || leaving[pi.UID],
			Protected: blocked || pi.State == placement.PodAssumed || pi.Priority >= ProtectedPriority}
	}
	var best placement.PreemptionPlan
	found := false
	for _, name := range names {
		node, ok := view.Node(name)
		if !ok {
			continue
		}
		plan, ok := placement.PlanPreemption(node, req, priority, info)
		if ok && (!found || plan.Compare(&best) < 0) {
			best, found = plan, true
		}
	}
	return best, found
}

// writeHold writes plan's hold on pod, signed, and puts it in force. It lasts the victims'
// longest grace period plus DefaultHoldSlack, at most MaxHold. Caller holds p.planning.
func (p *Preemptor) writeHold(ctx context.Context, pod *v1.Pod, plan *placement.PreemptionPlan) (HoldRecord, error) {
	grace := int64(v1.DefaultTerminationGracePeriodSeconds)
	names := make([]string, 0, len(plan.Victims))
	uids := make([]types.UID, 0, len(plan.Victims))
	for _, v := range plan.Victims {
		names, uids = append(names, v.Key()), append(uids, v.UID)
		if obj, ok := p.podObject(ctx, v.Namespace, v.Name, v.UID); ok && obj.Spec.TerminationGracePeriodSeconds != nil {
			grace = max(grace, *obj.Spec.TerminationGracePeriodSeconds)
		}
	}
	rec := HoldRecord{Node: plan.Node, GPU: plan.Index, Units: plan.Need, Victims: names,
		Until: p.now().Add(min(MaxHold, time.Duration(grace)*time.Second+DefaultHoldSlack)).UTC().Truncate(time.Second)}
	rec.MAC = holdMAC(p.key, pod.UID, &rec)
	raw, err := json.Marshal(rec)
	if err != nil {
		return rec, fmt.Errorf("encode the hold: %w", err)
	}
	// the fence, as before a Binding
	if err := p.fence.PatchPod(ctx, pod.Namespace, pod.Name, pod.UID, map[string]any{p.names.PreemptionAnnotation: string(raw)}); err != nil {
		return rec, fmt.Errorf("write the hold on %s: %w", klog.KObj(pod), err)
	}
	p.holds.add(hold{HoldRecord: rec, pod: pod.UID, namespace: pod.Namespace, name: pod.Name, victims: uids})
	return rec, nil
}
