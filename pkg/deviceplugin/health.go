package deviceplugin

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
)

// ReasonGPUUnhealthy is the Warning event on each pod placed on a card that a critical XID took
// out: the event names the card, the XID and the node.
const ReasonGPUUnhealthy = "GPUUnhealthy"

// DefaultIgnoredXIDs are the XIDs that leave a card healthy, the same as NVIDIA's
// k8s-device-plugin ignores (internal/rm/health.go): faults of the application that ran into
// them, not of the card. 13 graphics engine exception, 31 GPU memory page fault, 43 GPU
// stopped processing, 45 preemptive cleanup (after an earlier error), 68 video processor
// exception, 109 context switch timeout. Taking a card away for them would let one tenant's bad
// kernel evict its neighbours' capacity.
func DefaultIgnoredXIDs() []uint64 { return []uint64{13, 31, 43, 45, 68, 109} }

// watchHealth marks a GPU unhealthy on a critical XID until the plugin restarts: all its units
// Unhealthy to kubelet, healthy false in the node annotation, and a Warning event on every pod
// placed on it. It returns when ctx ends or NVML events cannot be used (then health is not
// watched, and it says so).
func (p *Plugin) watchHealth(ctx context.Context) {
	nvml.WatchCriticalXIDs(ctx, p.nv, p.inv.uuids(), p.cfg.ignoredXIDs, func(ev nvml.Event) { p.markUnhealthy(ctx, ev) })
}

// markUnhealthy applies a critical XID: the named GPU, or every GPU when NVML named none. The
// pods on the cards that changed get a Warning event each.
func (p *Plugin) markUnhealthy(ctx context.Context, ev nvml.Event) {
	uuids := []string{ev.UUID}
	if ev.UUID == "" {
		uuids = p.inv.uuids()
	}
	var changed []gpu
	for _, uuid := range uuids {
		if p.inv.setHealthy(uuid, false) {
			if card, ok := p.inv.lookupUUID(uuid); ok {
				changed = append(changed, card)
			}
		}
	}
	logger := klog.FromContext(ctx)
	for _, card := range changed {
		logger.Error(nil, "Critical XID: GPU marked unhealthy, its units are no longer offered", "xid", ev.XID, "gpu", card.Index, "uuid", card.UUID)
	}
	if len(changed) == 0 {
		logger.Info("Critical XID on a GPU already unhealthy", "xid", ev.XID, "uuid", ev.UUID)
		return
	}
	p.reconciler.triggerNode()
	p.warnPodsOn(ctx, changed, ev.XID)
}

// warnPodsOn records a Warning event on every pod of the node placed on one of cards (not
// finished), naming the card, the XID and the node.
func (p *Plugin) warnPodsOn(ctx context.Context, cards []gpu, xid uint64) {
	logger := klog.FromContext(ctx)
	pods, err := p.cfg.pods.NodePods(ctx)
	if err != nil {
		logger.Error(err, "Cannot list the pods on the unhealthy GPUs: they get no event", "xid", xid)
		return
	}
	for _, pod := range pods {
		if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue
		}
		for _, card := range cards {
			if placedOn(pod, &p.cfg.names, card.Index) {
				msg := fmt.Sprintf("GPU %d (%s, %s) on node %s had critical XID %d and is marked unhealthy: its memory is no longer offered, "+
					"and this pod's containers on it may fail; delete the pod to have it placed on a healthy card", card.Index, card.UUID, card.Model,
					p.cfg.nodeName, xid)
				logger.Info("Pod on an unhealthy GPU", "pod", klog.KObj(pod), "gpu", card.Index, "xid", xid)
				p.warnPod(ctx, pod, ReasonGPUUnhealthy, msg)
			}
		}
	}
}

// placedOn reports whether pod's placement puts memory on the card with NVML index gpu.
func placedOn(pod *v1.Pod, names *contract.Names, gpu int) bool {
	req, err := contract.ParseRequest(pod, names)
	if err != nil || req.Empty() {
		return false
	}
	alloc, ok, err := contract.AllocationFromPod(pod, &req)
	if err != nil || !ok {
		return false
	}
	_, on := alloc.PerGPU()[gpu]
	return on
}
