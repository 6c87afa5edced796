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

// resolvePollInterval is how often resolve looks again while waiting for the pod source.
const resolvePollInterval = 50 * time.Millisecond

// choice is the container an Allocate is for, and the GPUs the extender chose for it.
type choice struct {
	pod       *v1.Pod
	req       contract.PodRequest
	container contract.ContainerRequest
	placement map[int]int64
}

// candidates is one pass over the node's pods; rejected explains the pods that were skipped.
type candidates struct {
	best     *choice
	rejected []string
}

// resolve finds the container kubelet is allocating units devices for. With handOut it also
// records the answer, in the same critical section, so two Allocates never get the same container.
func (p *Plugin) resolve(ctx context.Context, units int64, ids []string, handOut bool) (*choice, error) {
	var found *choice
	var last candidates
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
		if last.best == nil && kv != nil { // the kubelet may not list the pod it is admitting yet
			last = p.pickLocked(pods, units, nil)
		}
		if found = last.best; found != nil && handOut {
			p.tracker.addLocked(&handout{owner: refOf(found), units: units, devices: devicesKey(ids),
				placement: maps.Clone(found.placement), at: time.Now()})
		}
		return found != nil, nil
	})
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
// simply not gpushare pods waiting for Allocate). Caller holds p.tracker.mu.
func (p *Plugin) candidate(pod *v1.Pod, livePods int, units int64, kv *kubeletView) (*choice, string) {
	if pod.Annotations[contract.AnnotationAssigned] == "true" || pod.DeletionTimestamp != nil ||
		pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return nil, ""
	}
	req, alloc, ok, err := p.parseLocked(pod, livePods)
	switch {
	case err != nil:
		return nil, err.Error()
	case req.Empty():
		return nil, ""
	case !ok:
		return nil, "no placement annotation " + contract.AnnotationAllocation + " (not bound by the gpushare extender?)"
	}
	nn := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	if !kv.knows(nn) {
		return nil, ""
	}
	next, ok := p.tracker.nextContainerLocked(pod.UID, nn, &req, kv)
	if !ok {
		return nil, ""
	}
	if next.Units != units {
		return nil, fmt.Sprintf("next container %q asks %d", next.Name, next.Units)
	}
	placement := alloc[next.Key]
	if len(placement) == 0 {
		return nil, fmt.Sprintf("placement has no entry for container %s (%q)", next.Key, next.Name)
	}
	return &choice{pod: pod, req: req, container: next, placement: placement}, ""
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
