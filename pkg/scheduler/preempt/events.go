package preempt

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/placement"
)

// recordPreempted records on the victim v, just removed, which pod preempted it (an event,
// when there is a recorder and the victim can still be read).
func (p *Preemptor) recordPreempted(ctx context.Context, pod *v1.Pod, plan *placement.PreemptionPlan, v *placement.PodInfo) {
	if p.recorder == nil {
		return
	}
	if obj, ok := p.podObject(ctx, v.Namespace, v.Name, v.UID); ok {
		p.recorder.Eventf(obj, pod, v1.EventTypeNormal, ReasonPreempted, "Preempting",
			"Preempted by %s (priority %d) to free GPU %d on node %s", klog.KObj(pod), cache.PodPriority(pod), plan.Index, plan.Node)
	}
}

// recordPreempting tells, in an event on pod and the log, what its preemption did.
func (p *Preemptor) recordPreempting(ctx context.Context, pod *v1.Pod, plan *placement.PreemptionPlan, rec *HoldRecord, evicted []string) {
	until, unit := rec.Until.Format(time.RFC3339), p.names.UnitLabel()
	var msg string
	switch {
	case len(plan.Victims) > 0:
		msg = fmt.Sprintf("Preempting %s on node %s GPU %d: frees %d of the %d %s needed there (the card is held for this pod until %s)",
			strings.Join(evicted, ", "), plan.Node, plan.Index, plan.Units, plan.Need, unit, until)
	case len(plan.Waiting) > 0:
		msg = fmt.Sprintf("Waiting on node %s GPU %d for terminating pods to free the %d %s needed (the card is held for this pod until %s)",
			plan.Node, plan.Index, plan.Need, unit, until)
	default: // fits now: memory freed since kube-scheduler looked
		klog.FromContext(ctx).V(2).Info("Preemption not needed: memory freed meanwhile is held for the pod", "pod", klog.KObj(pod),
			"node", plan.Node, "gpu", plan.Index, "units", plan.Need)
		return
	}
	if p.recorder != nil {
		p.recorder.Eventf(pod, nil, v1.EventTypeNormal, ReasonPreempting, "Preempting", "%s", msg)
	}
	klog.FromContext(ctx).Info("Preempting", "pod", klog.KObj(pod), "node", plan.Node, "gpu", plan.Index, "victims", evicted, "units", plan.Units, "need", plan.Need)
}

// failed records why pod cannot preempt: an event at most once per failedEventEvery per pod
// and reason.
func (p *Preemptor) failed(pod *v1.Pod, why string) {
	key := string(pod.UID) + "/" + why
	now := p.now()
	if last, ok := p.failures.Load(key); ok && now.Sub(last.(time.Time)) < failedEventEvery {
		return
	}
	p.failures.Store(key, now)
	p.metrics.failed.Inc()
	if p.recorder != nil {
		p.recorder.Eventf(pod, nil, v1.EventTypeWarning, ReasonPreemptionFailed, "Preempting", "Cannot free a GPU for this pod: %s", why)
	}
}

// failedEventEvery spaces a pod's GPUPreemptionFailed events of one reason.
const failedEventEvery = time.Minute

// joinReasons lists a map's reasons.
func joinReasons(m map[types.UID]string) string {
	out := make([]string, 0, len(m))
	for _, why := range m {
		out = append(out, why)
	}
	return strings.Join(out, "; ")
}
