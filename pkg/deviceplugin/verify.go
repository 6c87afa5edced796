package deviceplugin

import (
	"context"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
)

// verify learns, for each unverified handout, which container the kubelet really gave its
// devices to, then rebalances the placements so that every such container's annotation names
// the env it got. It relies on the handout recording the placement that Allocate's env was
// built from (tracker.admit, containerResponse): a change to what Allocate hands out must keep
// that so, and keep what rebalance moves (the placement) all that a wrong guess got wrong.
func (p *Plugin) verify(ctx context.Context, kv *kubeletView, pods map[types.NamespacedName]*v1.Pod) {
	logger := klog.FromContext(ctx)
	handouts := p.tracker.snapshot()
	owners := kv.owners()
	truths := map[int]ownerRef{}
	for i, h := range handouts {
		if h.verified {
			continue
		}
		truth, found := pickOwner(owners[h.devices], h.owner)
		if !found && isInit(h.owner.key) {
			truth, found = p.initOwner(handouts, i, owners, pods)
		}
		switch {
		case found:
			truths[i] = truth
		case time.Since(h.at) > p.cfg.verifyTTL:
			logger.Info("Allocate answer never showed up in the kubelet's pod resources; trusting the guess",
				"pod", h.owner.pod, "container", h.owner.name, "devices", h.devices)
			truths[i] = ownerRef{pod: h.owner.pod, container: h.owner.name}
		}
	}
	if len(truths) == 0 {
		return
	}
	if err := p.rebalance(ctx, handouts, truths, pods); err != nil {
		logger.Error(err, "Correcting placements after Allocate failed; will retry")
	}
}

func isInit(key string) bool { return strings.HasPrefix(key, "init-") }

// initOwner finds the real owner of an init container's handout, which the kubelet's
// PodResources does not list: kubelet allocates a pod's containers back to back, so the first
// app-container handout after it belongs to the same pod; the init container is the one with
// the same key in that pod.
func (p *Plugin) initOwner(handouts []handout, i int, owners map[string][]ownerRef, pods map[types.NamespacedName]*v1.Pod) (ownerRef, bool) {
	j := i + 1
	for j < len(handouts) && isInit(handouts[j].owner.key) {
		j++
	}
	if j == len(handouts) {
		return ownerRef{}, false
	}
	next := handouts[j]
	truth := ownerRef{pod: next.owner.pod, container: next.owner.name}
	if !next.verified {
		var found bool
		if truth, found = pickOwner(owners[next.devices], next.owner); !found {
			return ownerRef{}, false
		}
	}
	pod := pods[truth.pod]
	if pod == nil {
		return ownerRef{}, false
	}
	req, err := contract.ParseRequest(pod, &p.cfg.names)
	if err != nil {
		return ownerRef{}, false
	}
	for _, c := range req.Containers {
		if c.Key == handouts[i].owner.key {
			return ownerRef{pod: truth.pod, container: c.Name}, true
		}
	}
	return ownerRef{}, false
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
