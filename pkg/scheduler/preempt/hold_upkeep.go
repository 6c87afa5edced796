package preempt

import (
	"context"
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/scheduler/fence"
)

// RebuildHolds puts in force the holds the API's pods carry (a restarted extender); the
// leader does it again whenever it starts to lead (MaintainHolds). A hold whose MAC does not
// verify under the preemptor's key is ignored: logged at V(2) the first time, and counted. It
// does nothing while preemption is off or without Config.Pods.
func (p *Preemptor) RebuildHolds(logger klog.Logger) error {
	if !p.enabled || p.pods == nil {
		return nil
	}
	asks := func(pod *v1.Pod) int64 {
		req, err := contract.ParseRequest(pod, &p.names)
		if err != nil || placement.PreemptionUnsupported(&req) {
			return 0
		}
		return req.TotalUnits()
	}
	ignored, err := p.holds.rebuild(p.pods, p.names.PreemptionAnnotation, p.key, asks)
	for _, pod := range ignored {
		logger.V(2).Info("Preemption hold ignored: not signed by this extender's key (written by hand, or under another --hold-key-file)",
			"pod", klog.KObj(pod), "annotation", p.names.PreemptionAnnotation)
		p.metrics.holdsIgnored.Inc()
	}
	return err
}

// EndHold ends the hold of pod, just bound: it leaves the set and, when the pod carries its
// annotation or this replica held a card for it, the annotation leaves the pod. A Binding
// cannot remove an annotation, so a patch follows it. A failure is only logged: the hold of a
// bound pod is never rebuilt, and the sweep drops it from the set of another replica.
func (p *Preemptor) EndHold(ctx context.Context, pod *v1.Pod) {
	held := p.holds.remove(pod.UID)
	if _, annotated := pod.Annotations[p.names.PreemptionAnnotation]; !held && !annotated {
		return
	}
	logger := klog.FromContext(ctx)
	// the API server refuses it unfenced
	err := p.fence.PatchPod(ctx, pod.Namespace, pod.Name, pod.UID, map[string]any{p.names.PreemptionAnnotation: nil})
	switch {
	case errors.Is(err, fence.ErrNotLeader):
		logger.V(2).Info("Preemption hold left on a bound pod: this replica no longer leads", "pod", klog.KObj(pod), "err", err)
		return
	case err != nil && !apierrors.IsNotFound(err):
		logger.Error(err, "Removing the preemption hold from a bound pod failed", "pod", klog.KObj(pod))
		return
	}
	logger.V(2).Info("Preemption hold ended: the pod is bound", "pod", klog.KObj(pod))
}

// sweepEvery is how often, at most, the holds are checked against the API's pods.
const sweepEvery = time.Second

// MaintainHolds rebuilds the holds from the API's pods when this replica starts to lead, and
// at most once every sweepEvery drops those that ran out or whose pod is gone or bound (and
// forgets old GPUPreemptionFailed and deferral marks). Filter calls it: nearly free when
// nothing is held.
func (p *Preemptor) MaintainHolds(logger klog.Logger) {
	if !p.enabled {
		return
	}
	if p.leadership != nil && p.pods != nil {
		p.rebuildOnLeading(logger)
	}
	now := p.now().UnixNano()
	last := p.swept.Load()
	if now-last < int64(sweepEvery) || !p.swept.CompareAndSwap(last, now) {
		return
	}
	for _, h := range p.holds.expire(p.pods) {
		logger.V(2).Info("Preemption hold ended", "pod", klog.KRef(h.namespace, h.name), "node", h.Node, "gpu", h.GPU)
	}
	p.failures.Range(func(k, v any) bool {
		if t, ok := v.(time.Time); !ok || p.now().Sub(t) >= failedEventEvery {
			p.failures.Delete(k)
		}
		return true
	})
	p.deferred.Range(func(k, v any) bool {
		if t, ok := v.(time.Time); !ok || p.now().Sub(t) >= deferral {
			p.deferred.Delete(k)
		}
		return true
	})
}

// rebuildOnLeading rebuilds the holds when this replica has started to lead since the last
// look.
func (p *Preemptor) rebuildOnLeading(logger klog.Logger) {
	if !p.leadership.Leading() {
		p.led.Store(false)
		return
	}
	if p.led.Swap(true) {
		return
	}
	if err := p.RebuildHolds(logger); err != nil {
		logger.Error(err, "Rebuilding the preemption holds failed")
	} else if n := p.holds.count.Load(); n > 0 {
		logger.Info("Leading: preemption holds rebuilt from the pods", "holds", n)
	}
}
