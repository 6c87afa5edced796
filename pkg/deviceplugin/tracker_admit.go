package deviceplugin

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
)

// How the admission ledger (tracker) judges which container an Allocate is for. Everything in
// this file runs under t.mu, inside tracker.admit; docs/deviceplugin.md ("Which pod is
// Allocate for?") has the reasoning.

// admitRules is what the ledger judges pods by: the contract's names and the node's cards.
// They are fixed when the plugin is built (Plugin.rules) and passed in, so that a zero tracker
// is ready to use. The inventory has a lock of its own, taken after t.mu.
type admitRules struct {
	names *contract.Names
	inv   *inventory
	node  string
}

// admitQuery is one resolve pass: kubelet allocates units devices (ids) to some container of
// pods; kv is the kubelet's view (nil: unknown). handOut records the answer (Allocate);
// without it the ledger only answers (GetPreferredAllocation).
type admitQuery struct {
	pods    []*v1.Pod
	kv      *kubeletView
	units   int64
	ids     []string
	handOut bool
}

// admitAnswer is the ledger's answer: the pass's candidates, why admitting the best one would
// over-commit a card ("" when it would not, or was not checked), and whether to ask again
// because the kubelet holds a pod the pod source does not show yet.
type admitAnswer struct {
	candidates
	over string
	wait bool
}

// pickLocked chooses, among pods the kubelet holds (all when kv is nil), the earliest created
// one whose next gpu-mem container asks units: kubelet admits pods in creation order, one at a
// time, container by container. Caller holds t.mu.
func (t *tracker) pickLocked(r admitRules, pods []*v1.Pod, units int64, kv *kubeletView) candidates {
	var out candidates
	t.pruneRefusedLocked(pods)
	for _, pod := range pods {
		ch, why := t.candidateLocked(r, pod, len(pods), units, kv)
		if ch == nil {
			if why != "" {
				out.rejected = append(out.rejected, klog.KObj(pod).String()+": "+why)
			}
			continue
		}
		if out.best == nil || admittedBefore(pod, out.best.pod) {
			out.best = ch
		}
	}
	return out
}

// candidateLocked returns pod's next container when it asks units, or why not ("" for pods
// that are simply not gpushare pods waiting for Allocate). A pod waiting for units without a
// usable placement is a candidate too, marked broken: kubelet may be admitting it, and then
// this Allocate must fail rather than hand it another pod's card. Caller holds t.mu.
func (t *tracker) candidateLocked(r admitRules, pod *v1.Pod, livePods int, units int64, kv *kubeletView) (*choice, string) {
	if pod.Annotations[contract.AnnotationAssigned] == "true" || pod.DeletionTimestamp != nil ||
		pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed || t.refused[pod.UID] {
		return nil, ""
	}
	req, alloc, ok, err := t.parsed.parseLocked(pod, r.names, livePods)
	if req.Empty() { // no gpu-mem, or a request that does not parse (nothing to match units with)
		if err != nil {
			return nil, err.Error()
		}
		return nil, ""
	}
	nn := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	if !kv.knows(nn) {
		return nil, ""
	}
	next, more := t.nextContainerLocked(pod.UID, nn, &req, kv)
	if !more {
		return nil, ""
	}
	if next.Units != units {
		return nil, fmt.Sprintf("next container %q asks %d", next.Name, next.Units)
	}
	ch := &choice{pod: pod, req: req, container: next, placement: alloc[next.Key], alloc: alloc}
	switch {
	case err != nil:
		ch.broken = err.Error()
	case !ok:
		ch.broken = "no placement annotation " + contract.AnnotationAllocation + " (not bound by the gpushare extender?)"
	case len(ch.placement) == 0:
		ch.broken = fmt.Sprintf("placement has no entry for container %s (%q)", next.Key, next.Name)
	default:
		ch.broken = r.checkPlacement(next, ch.placement)
	}
	return ch, ""
}

// checkPlacement says why placement cannot be handed to container c ("" when it can): it must
// be what the extender places for c's ask (contract.CheckPlacement: c's units split evenly
// over c's card count), on cards the node has. A placement annotation is only as trustworthy
// as whoever wrote it, and Allocate's answer (its cards and per-card limits) is built from it,
// so a hand-written one asking one unit and naming two whole cards must fail here.
//
// Only c's own entry is judged, not its siblings': when the kubelet admitted another pod's
// container of equal units than the one Allocate guessed, the correction
// (rebalance_placements.go) may have written a sibling an entry of another card count, and
// that sibling, already allocated, must not fail the containers that follow it.
func (r admitRules) checkPlacement(c contract.ContainerRequest, placement map[int]int64) string {
	if err := contract.CheckPlacement(c, placement); err != nil {
		return "refusing a placement that does not match the container's ask: " + err.Error()
	}
	return r.missingGPU(placement)
}

// nextContainerLocked is the container of pod that kubelet allocates next: the first gpu-mem
// container after the last one already allocated (by this plugin, or per the kubelet's own
// view kv, which survives plugin restarts but omits plain init containers). Kubelet allocates a
// pod's containers in order, init containers first. Caller holds t.mu.
func (t *tracker) nextContainerLocked(uid types.UID, nn types.NamespacedName, req *contract.PodRequest, kv *kubeletView) (contract.ContainerRequest, bool) {
	last := -1
	for i, c := range req.Containers {
		if t.hasLocked(uid, c.Key) || kv.hasDevices(nn, c.Name) {
			last = i
		}
	}
	if last+1 < len(req.Containers) {
		return req.Containers[last+1], true
	}
	return contract.ContainerRequest{}, false
}

// overCapacityLocked says which card the pod of ch would put over capacity, given the pods
// admitted on the node ("" when none would be); see capacity_guard.go. Caller holds t.mu.
func (t *tracker) overCapacityLocked(r admitRules, pods []*v1.Pod, kv *kubeletView, ch *choice) string {
	load := map[int]int64{}
	for _, pod := range pods {
		if pod.UID == ch.pod.UID || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		req, alloc, ok, err := t.parsed.parseLocked(pod, r.names, len(pods))
		if err != nil || !ok || req.Empty() {
			continue
		}
		if !t.admittedLocked(pod, &req, kv) {
			continue
		}
		for g, u := range alloc.PerGPU() {
			load[g] += u
		}
	}
	for g, u := range ch.alloc.PerGPU() {
		card, ok := r.inv.lookup(g)
		if ok && load[g]+u > card.units {
			return fmt.Sprintf("GPU %d has %d units, the pods admitted on it hold %d and this pod asks %d", g, card.units, load[g], u)
		}
	}
	return ""
}

// admittedLocked reports whether pod holds GPU memory on the node already: the plugin handed
// one of its containers devices, the kubelet shows devices for one, or it is marked assigned.
// Caller holds t.mu.
func (t *tracker) admittedLocked(pod *v1.Pod, req *contract.PodRequest, kv *kubeletView) bool {
	if pod.Annotations[contract.AnnotationAssigned] == "true" {
		return true
	}
	nn := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	for _, h := range t.handouts {
		if h.owner.uid == pod.UID {
			return true
		}
	}
	for _, c := range req.Containers {
		if kv.hasDevices(nn, c.Name) {
			return true
		}
	}
	return false
}

// missingGPU says which GPU of placement the node does not have ("" when it has them all).
func (r admitRules) missingGPU(placement map[int]int64) string {
	for g := range placement {
		if _, ok := r.inv.lookup(g); !ok {
			return fmt.Sprintf("placement names GPU %d, which node %s does not have", g, r.node)
		}
	}
	return ""
}
