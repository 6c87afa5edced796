package deviceplugin

import (
	"context"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// verify compares each unverified handout with the container the kubelet actually gave its
// devices to, and corrects the annotations when the guess was wrong.
func (p *Plugin) verify(ctx context.Context, kv *kubeletView, pods map[types.NamespacedName]*v1.Pod) {
	logger := klog.FromContext(ctx)
	owners := kv.owners()
	for _, h := range p.tracker.snapshot() {
		if h.verified {
			continue
		}
		truth, found := pickOwner(owners[h.devices], h.owner)
		switch {
		case found && truth.pod == h.owner.pod && truth.container == h.owner.name:
			p.tracker.update(h.devices, h.at, func(l *handout) { l.verified = true })
		case found:
			p.correct(ctx, h, truth, pods)
		case strings.HasPrefix(h.owner.key, "init-") && kv.knows(h.owner.pod):
			// kubelet's PodResources omits plain init containers: trust the guess.
			p.tracker.update(h.devices, h.at, func(l *handout) { l.verified = true })
		case time.Since(h.at) > p.cfg.verifyTTL:
			logger.Info("Allocate answer never showed up in the kubelet's pod resources; trusting the guess",
				logKeyPod, h.owner.pod, logKeyContainer, h.owner.name, logKeyDevices, h.devices)
			p.tracker.update(h.devices, h.at, func(l *handout) { l.verified = true })
		}
	}
}

// pickOwner chooses among the containers holding a device set: the guessed one if it is there.
func pickOwner(candidates []ownerRef, guess containerRef) (ownerRef, bool) {
	for _, o := range candidates {
		if o.pod == guess.pod && o.container == guess.name {
			return o, true
		}
	}
	if len(candidates) == 0 {
		return ownerRef{}, false
	}
	return candidates[0], true
}
