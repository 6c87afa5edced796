package deviceplugin

import (
	"context"
	"errors"
	"time"

	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
)

// healthWaitTimeout is how long one NVML event wait blocks, so that the loop sees ctx end.
const healthWaitTimeout = time.Second

// applicationXIDs are Xid codes caused by the application, not the card (as in NVIDIA's device
// plugin): graphics engine exception, GPU memory page fault, reset channel verification error,
// preemptive cleanup, video processor exception, uncorrectable ECC in a user context.
func applicationXIDs() map[uint64]bool {
	return map[uint64]bool{13: true, 31: true, 43: true, 45: true, 68: true, 109: true}
}

// watchHealth marks a GPU unhealthy on a critical XID until the plugin restarts. It returns
// when ctx ends or NVML events cannot be used (then health is not watched, and it says so).
func (p *Plugin) watchHealth(ctx context.Context) {
	logger := klog.FromContext(ctx)
	w, err := p.nv.WatchXIDs(p.inv.uuids())
	if err != nil {
		logger.Error(err, "GPU health is not watched: NVML XID events unavailable")
		return
	}
	defer func() { _ = w.Close() }()
	ignore := applicationXIDs()
	for ctx.Err() == nil {
		ev, err := w.Wait(healthWaitTimeout)
		switch {
		case errors.Is(err, nvml.ErrTimeout):
			continue
		case err != nil:
			logger.Error(err, "Waiting for NVML events failed; GPU health is no longer watched")
			return
		case ignore[ev.XID]:
			logger.V(2).Info("Application XID ignored", "xid", ev.XID, "uuid", ev.UUID)
			continue
		}
		p.markUnhealthy(ctx, ev)
	}
}

// markUnhealthy applies a critical XID: the named GPU, or every GPU when NVML named none.
func (p *Plugin) markUnhealthy(ctx context.Context, ev nvml.Event) {
	changed := false
	if ev.UUID == "" {
		changed = p.inv.setAllHealthy(false)
	} else {
		changed = p.inv.setHealthy(ev.UUID, false)
	}
	klog.FromContext(ctx).Info("Critical XID: GPU marked unhealthy", "xid", ev.XID, "uuid", ev.UUID, "changed", changed)
	if changed {
		p.reconciler.triggerNode()
	}
}
