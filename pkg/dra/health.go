package dra

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
)

// healthResend is how often the cards' health is sent to kubelet when nothing changed: kubelet
// takes a device's health as unknown when it was not refreshed within 30 seconds.
const healthResend = 10 * time.Second

// watchHealth taints a card NoSchedule on a critical XID (device-plugin mode's health logic:
// the same ignored XIDs, every card when NVML names none) until the driver restarts: its
// device stays published, so that the claims on it stay visible, and no new claim that does
// not tolerate the taint gets it. The pods of the claims on it get a Warning event. It returns
// when ctx ends or NVML events cannot be used (then health is not watched, and it says so).
func (d *Driver) watchHealth(ctx context.Context) {
	nvml.WatchCriticalXIDs(ctx, d.nv, d.cards.uuids(), d.cfg.IgnoredXIDs, func(ev nvml.Event) { d.markSick(ctx, ev, time.Now()) })
}

// markSick applies a critical XID at now: it taints the named card, or every card when NVML
// named none, republishes, and warns the pods of the claims on the cards that changed.
func (d *Driver) markSick(ctx context.Context, ev nvml.Event, now time.Time) {
	logger := klog.FromContext(ctx)
	uuids := []string{ev.UUID}
	if ev.UUID == "" {
		uuids = d.cards.uuids()
	}
	var changed []int
	for _, uuid := range uuids {
		if d.cards.markSick(uuid, ev.XID, now) {
			c := d.cards.list[d.cards.byUUID[uuid]]
			changed = append(changed, c.Index)
			logger.Error(nil, "Critical XID: GPU tainted NoSchedule, no new claim gets it", "xid", ev.XID, "gpu", c.Index, "uuid", c.UUID)
		}
	}
	if len(changed) == 0 {
		logger.Info("Critical XID on a GPU already tainted", "xid", ev.XID, "uuid", ev.UUID)
		return
	}
	d.republish(ctx)
	for _, rec := range d.claimsOn(changed) {
		d.warnPods(ctx, &rec, deviceplugin.ReasonGPUUnhealthy, fmt.Sprintf("claim %s/%s is on GPU(s) %v of node %s, which had critical XID %d and are "+
			"tainted NoSchedule: no new claim gets them, and this pod's containers on them may fail; delete the pod to have it placed on a healthy card",
			rec.Namespace, rec.Name, d.indexes(&rec), d.cfg.NodeName, ev.XID))
	}
}

// claimsOn lists the prepared claims with a share on one of the cards (by index).
func (d *Driver) claimsOn(indexes []int) []record {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []record
	for _, rec := range d.prepared {
		if slices.ContainsFunc(rec.Shares, func(s share) bool { return slices.Contains(indexes, s.Index) }) {
			out = append(out, rec)
		}
	}
	return out
}

// WatchHealthStatus sends kubelet the health of every card (kubelet shows it in the status of
// the pods that use them): now, at every change, and every healthResend. Without the health
// check it reports nothing (kubeletplugin.ErrHealthNotSupported).
func (d *Driver) WatchHealthStatus(ctx context.Context, reports chan<- kubeletplugin.DeviceHealthReport) error {
	if !d.cfg.HealthCheck {
		return kubeletplugin.ErrHealthNotSupported
	}
	resend := time.NewTicker(healthResend)
	defer resend.Stop()
	for {
		sick, changed := d.cards.health()
		select {
		case <-ctx.Done():
			return nil
		case reports <- d.healthReport(sick, time.Now()):
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case <-resend.C:
		}
	}
}

// healthReport is every card's health at now.
func (d *Driver) healthReport(sick map[int]sickness, now time.Time) kubeletplugin.DeviceHealthReport {
	var r kubeletplugin.DeviceHealthReport
	for pos, c := range d.cards.list {
		h := kubeletplugin.DeviceHealth{PoolName: d.cfg.NodeName, DeviceName: c.name, Health: kubeletplugin.HealthStatusHealthy, LastUpdated: now}
		if s, out := sick[pos]; out {
			h.Health, h.Message = kubeletplugin.HealthStatusUnhealthy, fmt.Sprintf("critical XID %d at %s", s.xid, s.since.UTC().Format(time.RFC3339))
		}
		r.Devices = append(r.Devices, h)
	}
	return r
}
