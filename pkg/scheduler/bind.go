package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// ErrAlreadyBound: the pod is bound to another node than the one asked.
var ErrAlreadyBound = errors.New("pod is already bound to another node")

// Bind chooses the pod's GPU(s) on the node, charges them in the cache, writes the placement
// annotations with a Patch and then creates the Binding. A failure that proves the pod unbound
// rolls the charge and the annotations back; a Binding failure with an unknown outcome keeps
// the charge and settles it in the background (settle.go). A pod already bound to the node, or
// already assumed there, keeps its placement.
func (e *Extender) Bind(ctx context.Context, args *extenderv1.ExtenderBindingArgs) error {
	logger := klog.FromContext(ctx)
	if !e.Leading() {
		return fmt.Errorf("bind %s/%s: %w (leader: %q); kube-scheduler will retry", args.PodNamespace, args.PodName, ErrNotLeader, e.leadership.Leader())
	}
	pod, err := e.client.CoreV1().Pods(args.PodNamespace).Get(ctx, args.PodName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("bind %s/%s: get pod: %w", args.PodNamespace, args.PodName, err)
	}
	if args.PodUID != "" && pod.UID != args.PodUID {
		return fmt.Errorf("bind %s/%s: pod UID is %s, not %s (pod was recreated)", args.PodNamespace, args.PodName, pod.UID, args.PodUID)
	}
	if pod.Spec.NodeName != "" {
		return e.alreadyBound(pod, args.Node)
	}
	req, err := contract.ParseRequest(pod, &e.names)
	if err != nil {
		return fmt.Errorf("bind %s: %w", klog.KObj(pod), err)
	}
	e.inflight.begin(pod.UID)
	settling := false
	defer func() {
		if !settling {
			e.inflight.end(pod.UID)
		}
	}()
	if !req.Empty() {
		if err := e.place(ctx, pod, &req, args.Node); err != nil {
			return fmt.Errorf("bind %s to %s: %w", klog.KObj(pod), args.Node, err)
		}
	}
	if err := e.bindPod(ctx, pod, args.Node); err != nil {
		switch {
		case req.Empty(): // nothing charged: kube-scheduler's retry settles it
		case provesUnbound(err):
			e.release(logger, pod, &req)
		default:
			settling = true
			e.settle(logger, pod, &req, args.Node)
			return fmt.Errorf("%w (outcome unknown: the pod keeps its GPU memory on %s until the API server tells)", err, args.Node)
		}
		return err
	}
	e.learn(pod, &req) // now that the pod is bound
	e.metrics.binds.Add(1)
	return nil
}

// place charges the pod's GPU(s) on node and writes the placement annotations. When the patch
// fails the charge goes (no Binding was created, so the pod is unbound), and annotations the
// patch may have written after all are removed in the background.
func (e *Extender) place(ctx context.Context, pod *v1.Pod, req *contract.PodRequest, node string) error {
	alloc, err := e.assume(pod, req, node)
	if err != nil {
		return err
	}
	if err := e.annotate(ctx, pod, req, node, alloc); err != nil {
		e.cache.ForgetPod(pod.UID)
		if !provesUnbound(err) {
			logger := klog.FromContext(ctx)
			e.inflight.wg.Add(1)
			go func() {
				defer e.inflight.wg.Done()
				e.clearAnnotations(logger, pod)
			}()
		}
		return err
	}
	klog.FromContext(ctx).V(2).Info("Placed pod", "pod", klog.KObj(pod), "node", node, "allocation", alloc)
	return nil
}

// alreadyBound makes a retried bind idempotent: success when the pod is on node, an error
// otherwise. The cache is left to the informer: pod may already be stale (deleted since it was
// read), and recording it here would bring a deleted pod back for good.
func (e *Extender) alreadyBound(pod *v1.Pod, node string) error {
	if pod.Spec.NodeName != node {
		return fmt.Errorf("bind %s to %s: %w (%s)", klog.KObj(pod), node, ErrAlreadyBound, pod.Spec.NodeName)
	}
	return nil
}

// assume plans the pod on node and charges the plan, planning again when a concurrent bind took
// the cards first. An existing assumption for the pod on node is reused.
func (e *Extender) assume(pod *v1.Pod, req *contract.PodRequest, nodeName string) (contract.Allocation, error) {
	if p, ok := e.cache.Pod(pod.UID); ok {
		switch {
		case p.Node == nodeName && p.Allocation != nil:
			return p.Allocation, nil
		case p.State == placement.PodAssumed && p.Node != nodeName && !e.inflight.others(pod.UID):
			// Left by a bind whose outcome could not be settled; the pod was just read unbound
			// and no bind of it is under way, so that assumption is void.
			e.cache.ForgetPod(pod.UID)
		}
	}
	node, ok := e.cache.Node(nodeName)
	if !ok {
		return nil, fmt.Errorf("%w: %s", cache.ErrUnknownNode, nodeName)
	}
	d := placement.NewDecision(e.policy, req, cache.PodResources(pod))
	c, err := d.Place(node, e.names.UnitLabel())
	if err != nil {
		return nil, err
	}
	charge := func(node string, alloc contract.Allocation) (contract.Allocation, error) {
		return e.cache.AssumePod(pod, req, node, alloc)
	}
	return d.Assume(c, e.cache.Node, charge, e.names.UnitLabel())
}

// annotate writes the contract's placement annotations with a merge patch.
func (e *Extender) annotate(ctx context.Context, pod *v1.Pod, req *contract.PodRequest, nodeName string, alloc contract.Allocation) error {
	node, ok := e.cache.Node(nodeName)
	if !ok {
		return fmt.Errorf("%w: %s", cache.ErrUnknownNode, nodeName)
	}
	gpuUnits := map[int]int64{}
	for _, g := range node.GPUs {
		gpuUnits[g.Index] = g.Capacity
	}
	ann, err := contract.PlacementAnnotations(alloc, req, gpuUnits, e.now())
	if err != nil {
		return err
	}
	set := make(map[string]*string, len(ann))
	for k, v := range ann {
		set[k] = &v
	}
	return e.patchAnnotations(ctx, pod, set)
}

func (e *Extender) patchAnnotations(ctx context.Context, pod *v1.Pod, ann map[string]*string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann, "uid": pod.UID}})
	if err != nil {
		return fmt.Errorf("encode annotation patch: %w", err)
	}
	if _, err := e.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch annotations: %w", err)
	}
	return nil
}

// bindPod creates the Binding. A conflict because the pod got bound to this very node by an
// earlier attempt counts as success.
func (e *Extender) bindPod(ctx context.Context, pod *v1.Pod, node string) error {
	b := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: node},
	}
	err := e.client.CoreV1().Pods(pod.Namespace).Bind(ctx, b, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		if cur, gerr := e.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); gerr == nil && cur.UID == pod.UID && cur.Spec.NodeName == node {
			return nil
		}
	}
	return fmt.Errorf("bind %s to %s: create binding: %w", klog.KObj(pod), node, err)
}
