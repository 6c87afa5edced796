package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
)

// ErrNoPod is wrapped when no bound pod waits for a container of the requested size.
var ErrNoPod = errors.New("no pod to allocate for")

// ErrBrokenPlacement is wrapped when the pod kubelet is admitting has no usable placement (bound
// without one, or naming a GPU the node lacks): its Allocate fails, and only its own.
var ErrBrokenPlacement = errors.New("pod has no usable GPU placement")

// resolvePollInterval is how often resolve looks again while waiting for the pod source.
const resolvePollInterval = 50 * time.Millisecond

// choice is the container an Allocate is for, and the GPUs the extender chose for it.
type choice struct {
	pod       *v1.Pod
	req       contract.PodRequest
	container contract.ContainerRequest
	placement map[int]int64
	alloc     contract.Allocation // the whole pod's placement
	// broken says why the pod has no usable placement ("" when it has one).
	broken string
}

// candidates is one pass over the node's pods; rejected explains the pods that were skipped.
type candidates struct {
	best     *choice
	rejected []string
}

// resolve finds the container kubelet is allocating units devices for: it lists the pods and
// asks the kubelet (the I/O), then puts the question to the admission ledger (tracker.admit),
// again until the pod shows up or resolveWait ends. With handOut the ledger also records the
// answer, in the same critical section, so two Allocates never get the same container.
// When the container's pod cannot be admitted (no usable placement, or a card would go over
// capacity) it returns the choice with an error.
func (p *Plugin) resolve(ctx context.Context, units int64, ids []string, handOut bool) (*choice, error) {
	var found *choice
	var last candidates
	var over string // why admitting found would over-commit a card
	timeout := p.cfg.resolveWait
	if !handOut {
		timeout = 0 // GetPreferredAllocation: a preference is optional, never make kubelet wait
	}
	err := wait.PollUntilContextTimeout(ctx, resolvePollInterval, timeout, true, func(ctx context.Context) (bool, error) {
		pods, err := p.cfg.pods.NodePods(ctx)
		if err != nil {
			return false, fmt.Errorf("list pods of node %s: %w", p.cfg.nodeName, err)
		}
		kv := p.kubeletView(ctx)
		ans := p.tracker.admit(p.rules(), admitQuery{pods: pods, kv: kv, units: units, ids: ids, handOut: handOut})
		last, found, over = ans.candidates, ans.best, ans.over
		return found != nil, nil // found is nil too while ans.wait: look again
	})
	switch {
	case found != nil && found.broken != "":
		return found, fmt.Errorf("%w: %s, the earliest pod on node %s waiting for %d %s: %s", ErrBrokenPlacement,
			klog.KObj(found.pod), p.cfg.nodeName, units, p.cfg.names.UnitLabel(), found.broken)
	case over != "":
		return found, fmt.Errorf("%w: pod %s on node %s: %s", ErrOverCapacity, klog.KObj(found.pod), p.cfg.nodeName, over)
	}
	if found != nil {
		return found, nil
	}
	if err != nil && !wait.Interrupted(err) {
		return nil, err
	}
	return nil, fmt.Errorf("%w: no pod bound to node %s has a container waiting for %d %s of %s (skipped: %v)",
		ErrNoPod, p.cfg.nodeName, units, p.cfg.names.UnitLabel(), p.cfg.names.Resource, last.rejected)
}

// kubeletView asks the PodResources source; nil when there is none or it failed.
func (p *Plugin) kubeletView(ctx context.Context) *kubeletView {
	if p.cfg.podResources == nil {
		return nil
	}
	list, err := p.cfg.podResources.List(ctx)
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Kubelet pod resources unavailable; resolving from the API server alone", "err", err)
		return nil
	}
	return newKubeletView(list, p.cfg.names.Resource)
}

// rules are what the admission ledger judges this node's pods by.
func (p *Plugin) rules() admitRules {
	return admitRules{names: &p.cfg.names, inv: p.inv, node: p.cfg.nodeName}
}

// admittedBefore orders pods as kubelet admits them: by creation time, then namespace/name.
func admittedBefore(a, b *v1.Pod) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	if a.Namespace != b.Namespace {
		return a.Namespace < b.Namespace
	}
	return a.Name < b.Name
}

// refOf names the chosen container.
func refOf(ch *choice) containerRef {
	return containerRef{uid: ch.pod.UID, pod: types.NamespacedName{Namespace: ch.pod.Namespace, Name: ch.pod.Name},
		key: ch.container.Key, name: ch.container.Name}
}
