package enforce

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// Collect removes the counter folders of pods that are gone from the node (not in live) and
// were not written for CollectAfter, unmounting their tmpfs first.
func (h *hamiCore) Collect(ctx context.Context, live []types.UID, now time.Time) {
	logger := klog.FromContext(ctx)
	root := filepath.Join(h.cfg.StateDir, podsDir)
	entries, err := os.ReadDir(root)
	if err != nil {
		logger.Error(err, "Listing HAMi-core counter folders failed")
		return
	}
	alive := make(map[string]bool, len(live))
	for _, uid := range live {
		alive[string(uid)] = true
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || alive[e.Name()] || now.Sub(info.ModTime()) < h.cfg.CollectAfter {
			continue
		}
		if err := h.removeCounters(filepath.Join(root, e.Name())); err != nil {
			logger.Error(err, "Removing a gone pod's HAMi-core counters failed", "podUID", e.Name())
			continue
		}
		logger.V(2).Info("Removed a gone pod's HAMi-core counters", "podUID", e.Name())
	}
}
