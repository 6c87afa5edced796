package deviceplugin

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
)

// progress is what the handouts say about one pod's containers, by key.
type progress struct{ done, unverified map[string]bool }

// markAssigned sets AnnotationAssigned=true on pods whose gpu-mem containers all received their
// env (verified against the kubelet when a PodResources source is configured; or, after a plugin
// restart, seen with devices in the kubelet's view kv), and forgets the handouts of pods that are
// assigned or gone.
func (p *Plugin) markAssigned(ctx context.Context, pods map[types.NamespacedName]*v1.Pod, kv *kubeletView) {
	logger := klog.FromContext(ctx)
	byUID := map[types.UID]*progress{}
	handouts := p.tracker.snapshot()
	for _, h := range handouts {
		pr := byUID[h.owner.uid]
		if pr == nil {
			pr = &progress{done: map[string]bool{}, unverified: map[string]bool{}}
			byUID[h.owner.uid] = pr
		}
		pr.done[h.owner.key] = true
		if !h.verified && p.cfg.podResources != nil {
			pr.unverified[h.owner.key] = true
		}
	}
	live := map[types.UID]bool{}
	for _, pod := range pods {
		live[pod.UID] = pod.Annotations[contract.AnnotationAssigned] != "true"
		pr := byUID[pod.UID]
		if !live[pod.UID] || !p.settled(pod, pr, kv) {
			continue
		}
		if _, err := p.patchAnnotations(ctx, pod, map[string]string{contract.AnnotationAssigned: "true"}); err != nil {
			logger.Error(err, "Marking the pod assigned failed; will retry", "pod", klog.KObj(pod))
			continue
		}
		logger.V(2).Info("Pod assigned", "pod", klog.KObj(pod))
	}
	p.tracker.forgetSettled(live, p.cfg.verifyTTL)
}

// settled reports whether every gpu-mem container of pod got its env: by confirmed handouts,
// or, when the plugin has none for the pod (it restarted), by the kubelet's view of the app
// containers (init containers precede them).
func (p *Plugin) settled(pod *v1.Pod, pr *progress, kv *kubeletView) bool {
	if pr != nil {
		return len(pr.unverified) == 0 && p.allDone(pod, pr.done)
	}
	if kv == nil {
		return false
	}
	req, err := contract.ParseRequest(pod, &p.cfg.names)
	if err != nil || req.Empty() {
		return false
	}
	nn := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	apps := 0
	for _, c := range req.Containers {
		if c.Init {
			continue
		}
		apps++
		if !kv.hasDevices(nn, c.Name) {
			return false
		}
	}
	return apps > 0
}

// allDone reports whether every gpu-mem container of pod is in done.
func (p *Plugin) allDone(pod *v1.Pod, done map[string]bool) bool {
	req, err := contract.ParseRequest(pod, &p.cfg.names)
	if err != nil || req.Empty() {
		return false
	}
	for _, c := range req.Containers {
		if !done[c.Key] {
			return false
		}
	}
	return true
}
