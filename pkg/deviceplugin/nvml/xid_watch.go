package nvml

import (
	"context"
	"errors"
	"slices"
	"time"

	"k8s.io/klog/v2"
)

// xidWaitTimeout bounds each wait for an XID event, so that WatchCriticalXIDs sees ctx end
// within that time.
const xidWaitTimeout = time.Second

// WatchCriticalXIDs calls critical for every XID event on the GPUs uuids names whose XID is
// not in ignored (the application's own faults), until ctx ends or the events cannot be used
// (then the GPUs' health is no longer watched, and it logs so). Device-plugin mode and DRA mode
// both take a card out through it, each in its own way.
func WatchCriticalXIDs(ctx context.Context, nv Interface, uuids []string, ignored []uint64, critical func(Event)) {
	logger := klog.FromContext(ctx)
	w, err := nv.WatchXIDs(uuids)
	if err != nil {
		logger.Error(err, "GPU health is not watched: NVML XID events unavailable")
		return
	}
	defer func() { _ = w.Close() }()
	logger.Info("Watching GPU health", "ignoredXIDs", ignored)
	for ctx.Err() == nil {
		ev, err := w.Wait(xidWaitTimeout)
		switch {
		case errors.Is(err, ErrTimeout):
			continue
		case err != nil:
			logger.Error(err, "Waiting for NVML events failed; GPU health is no longer watched")
			return
		case slices.Contains(ignored, ev.XID):
			logger.V(2).Info("Application XID ignored", "xid", ev.XID, "uuid", ev.UUID)
			continue
		}
		critical(ev)
	}
}
