package deviceplugin

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
)

// reconciler wakes the background loop that does the plugin's API writes, so that Allocate
// itself never waits on the API server.
type reconciler struct {
	kick     chan struct{}
	nodeKick chan struct{}
}

func newReconciler() *reconciler {
	return &reconciler{kick: make(chan struct{}, 1), nodeKick: make(chan struct{}, 1)}
}

// trigger asks for a pass over the handouts.
func (r *reconciler) trigger() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// triggerNode asks for the node annotation to be written again.
func (r *reconciler) triggerNode() {
	select {
	case r.nodeKick <- struct{}{}:
	default:
	}
}

// runReconciler publishes the node and reconciles handouts until ctx ends.
func (p *Plugin) runReconciler(ctx context.Context) {
	logger := klog.FromContext(ctx)
	ticker := time.NewTicker(p.cfg.resyncPeriod)
	defer ticker.Stop()
	nodeDirty := true
	for {
		if nodeDirty {
			if err := p.publishNode(ctx); err != nil {
				logger.Error(err, "Publishing the GPU inventory failed; will retry")
			} else {
				nodeDirty = false
			}
		}
		p.ReconcileOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		case <-p.reconciler.kick:
		case <-p.reconciler.nodeKick:
			nodeDirty = true
		}
	}
}

// ReconcileOnce cross-checks every unverified Allocate answer against the kubelet's
// PodResources (correcting annotations after a wrong guess), marks pods whose gpu-mem
// containers are all allocated as assigned, and forgets what is settled. Run calls it in the
// background; tests may call it directly.
func (p *Plugin) ReconcileOnce(ctx context.Context) {
	logger := klog.FromContext(ctx)
	pods, err := p.cfg.pods.NodePods(ctx)
	if err != nil {
		logger.Error(err, "Reconcile: listing pods failed")
		return
	}
	byName := make(map[types.NamespacedName]*v1.Pod, len(pods))
	for _, pod := range pods {
		byName[types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}] = pod
	}
	var kv *kubeletView
	if p.cfg.podResources != nil {
		list, err := p.cfg.podResources.List(ctx)
		if err != nil {
			logger.V(2).Info("Reconcile: kubelet pod resources unavailable", "err", err)
		} else {
			kv = newKubeletView(list, p.cfg.names.Resource)
			p.verify(ctx, kv, byName)
		}
	}
	p.markAssigned(ctx, byName, kv)
	p.collectLimits(ctx, pods, time.Now())
}
