package deviceplugin

import (
	"context"
	"maps"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
)

// slot is one container's entry in a pod's placement.
type slot struct {
	pod   *v1.Pod
	alloc contract.Allocation
	key   string
}

// correct repairs a wrong guess: the kubelet gave h's devices (and so h's env) to truth, not to
// h.owner. truth's container gets h's placement in its annotation, and the container that held
// that placement without having received it (usually h.owner) gets truth's old one, so every
// container's env keeps naming the card its pod's annotations name and per-card totals stay.
func (p *Plugin) correct(ctx context.Context, h handout, truth ownerRef, pods map[types.NamespacedName]*v1.Pod) {
	logger := klog.FromContext(ctx).WithValues(logKeyPod, truth.pod, logKeyContainer, truth.container, logKeyGuess, h.owner.pod)
	q, ok := p.slotOf(pods[truth.pod], truth.container, h.units)
	if !ok {
		logger.Error(ErrNoPod, "Allocate guessed the wrong pod and the real one cannot be corrected (gone, or of another size)")
		p.tracker.update(h.devices, h.at, func(l *handout) { l.verified = true })
		return
	}
	ref := containerRef{uid: q.pod.UID, pod: truth.pod, key: q.key, name: truth.container}
	cur := q.alloc[q.key]
	if !maps.Equal(cur, h.placement) {
		x, ok := p.holderOf(h, q, pods)
		if !ok {
			logger.Error(ErrNoPod, "Allocate guessed the wrong pod and no container holds the placement to swap with")
			return
		}
		if x.pod.UID == q.pod.UID {
			x.alloc = q.alloc
		}
		q.alloc[q.key], x.alloc[x.key] = maps.Clone(h.placement), cur
		if err := p.patchPlacement(ctx, q.pod, q.alloc); err != nil {
			logger.Error(err, "Correcting the placement failed; will retry")
			return
		}
		if x.pod.UID != q.pod.UID {
			if err := p.patchPlacement(ctx, x.pod, x.alloc); err != nil {
				logger.Error(err, "Correcting the swapped placement failed; will retry")
				return
			}
		}
		logger.Info("Allocate had guessed the wrong pod; swapped the placement annotations",
			"gotPlacement", h.placement, "swappedWith", klog.KObj(x.pod))
	}
	p.tracker.update(h.devices, h.at, func(l *handout) { l.owner, l.verified = ref, true })
}

// slotOf finds the gpu-mem container named name of pod, if it asks units.
func (p *Plugin) slotOf(pod *v1.Pod, name string, units int64) (slot, bool) {
	if pod == nil {
		return slot{}, false
	}
	req, err := contract.ParseRequest(pod, &p.cfg.names)
	if err != nil {
		return slot{}, false
	}
	alloc, ok, err := contract.AllocationFromPod(pod, &req)
	if err != nil || !ok {
		return slot{}, false
	}
	for _, c := range req.Containers {
		if c.Name == name && c.Units == units {
			return slot{pod: pod, alloc: alloc.Clone(), key: c.Key}, true
		}
	}
	return slot{}, false
}

// holderOf finds the container whose annotation names h's placement but which did not receive
// it: the guessed container first, then any other not-yet-assigned one of the same size.
func (p *Plugin) holderOf(h handout, q slot, pods map[types.NamespacedName]*v1.Pod) (slot, bool) {
	if x, ok := p.slotOf(pods[h.owner.pod], h.owner.name, h.units); ok && maps.Equal(x.alloc[x.key], h.placement) {
		return x, true
	}
	for _, pod := range pods {
		if pod.Annotations[contract.AnnotationAssigned] == "true" {
			continue
		}
		req, err := contract.ParseRequest(pod, &p.cfg.names)
		if err != nil {
			continue
		}
		for _, c := range req.Containers {
			if pod.UID == q.pod.UID && c.Key == q.key {
				continue
			}
			x, ok := p.slotOf(pod, c.Name, h.units)
			if ok && maps.Equal(x.alloc[x.key], h.placement) && !p.received(pod.UID, c.Key, h.placement) {
				return x, true
			}
		}
	}
	return slot{}, false
}

// received reports whether a container verifiably got an env naming placement.
func (p *Plugin) received(uid types.UID, key string, placement map[int]int64) bool {
	p.tracker.mu.Lock()
	defer p.tracker.mu.Unlock()
	for _, h := range p.tracker.handouts {
		if h.owner.uid == uid && h.owner.key == key && h.verified && maps.Equal(h.placement, placement) {
			return true
		}
	}
	return false
}
