package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
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

// resolve finds the container kubelet is allocating units devices for. With handOut it also
// records the answer, in the same critical section, so two Allocates never get the same container.
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
		p.tracker.mu.Lock()
		defer p.tracker.mu.Unlock()
		last = p.pickLocked(pods, units, kv)
		if last.best == nil && kv != nil {
			if kv.awaitsUnseen(pods) {
				// The kubelet holds a pod without devices that the API server's pods do not show
				// yet: the pod being admitted, most likely. Wait for it; guessing among the pods
				// seen would hand this container another pod's card.
				return false, nil
			}
			last = p.pickLocked(pods, units, nil) // the kubelet may not list the pod it is admitting yet
		}
		switch found = last.best; {
		case found == nil || !handOut:
		case found.broken != "":
			p.tracker.refusedLocked()[found.pod.UID] = true // this Allocate was its: never pick it again
		default:
			if over = p.overCapacityLocked(pods, kv, found); over != "" {
				p.tracker.refusedLocked()[found.pod.UID] = true // a scheduler bug: fail this pod, loudly
				break
			}
			p.tracker.addLocked(&handout{owner: refOf(found), units: units, devices: devicesKey(ids),
				placement: maps.Clone(found.placement), at: time.Now()})
		}
		return found != nil, nil
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

// pickLocked chooses, among pods the kubelet holds (all when kv is nil), the earliest created
// one whose next gpu-mem container asks units: kubelet admits pods in creation order, one at a
// time, container by container. Caller holds p.tracker.mu.
func (p *Plugin) pickLocked(pods []*v1.Pod, units int64, kv *kubeletView) candidates {
	var out candidates
	p.tracker.pruneRefusedLocked(pods)
	for _, pod := range pods {
		ch, why := p.candidate(pod, len(pods), units, kv)
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

// candidate returns pod's next container when it asks units, or why not ("" for pods that are
// simply not gpushare pods waiting for Allocate). A pod waiting for units without a usable
// placement is a candidate too, marked broken: kubelet may be admitting it, and then this
// Allocate must fail rather than hand it another pod's card. Caller holds p.tracker.mu.
func (p *Plugin) candidate(pod *v1.Pod, livePods int, units int64, kv *kubeletView) (*choice, string) {
	if pod.Annotations[contract.AnnotationAssigned] == "true" || pod.DeletionTimestamp != nil ||
		pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed || p.tracker.refusedLocked()[pod.UID] {
		return nil, ""
	}
	req, alloc, ok, err := p.parseLocked(pod, livePods)
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
	next, more := p.tracker.nextContainerLocked(pod.UID, nn, &req, kv)
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
		ch.broken = p.missingGPU(ch.placement)
	}
	return ch, ""
}

// missingGPU says which GPU of placement the node does not have ("" when it has them all).
func (p *Plugin) missingGPU(placement map[int]int64) string {
	for g := range placement {
		if _, ok := p.inv.lookup(g); !ok {
			return fmt.Sprintf("placement names GPU %d, which node %s does not have", g, p.cfg.nodeName)
		}
	}
	return ""
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
