package scheduler

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// ErrAlreadyBound: the pod is bound to another node than the one asked.
var ErrAlreadyBound = errors.New("pod is already bound to another node")

// Bind chooses the pod's GPU(s) on the node, charges them in the cache and creates the Binding
// with the placement annotations on it: the API server copies a Binding's annotations onto the
// pod in the same update that sets spec.nodeName, so a pod is never bound without its placement
// nor annotated without being bound, and one API call binds it. A failure that proves the pod
// unbound releases the charge; a Binding failure with an unknown outcome keeps the charge and
// settles it in the background (settle.go). A pod already bound to the node, or already assumed
// there, keeps its placement.
func (e *Extender) Bind(ctx context.Context, args *extenderv1.ExtenderBindingArgs) error {
	logger := klog.FromContext(ctx)
	if !e.waitFenceLag(ctx) {
		return fmt.Errorf("bind %s/%s: %w (leader: %q); kube-scheduler will retry", args.PodNamespace, args.PodName, ErrNotLeader, e.leadership.Leader())
	}
	pod, err := e.readPod(ctx, args)
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
	// the one read of the node (through the holds): the checks, the placement and its
	// annotations all use it; only a concurrent bind's charge makes the placement read it again
	t := e.targetOf(pod, args.Node)
	if err := e.checkBindOn(pod, &req, args.Node, t.node, t.node != nil); err != nil {
		return err
	}
	e.inflight.begin(pod.UID)
	settling := false
	defer func() {
		if !settling {
			e.inflight.end(pod.UID)
		}
	}()
	var ann map[string]string
	if !req.Empty() {
		if ann, err = e.place(ctx, pod, &req, t); err != nil {
			return fmt.Errorf("bind %s to %s: %w", klog.KObj(pod), args.Node, err)
		}
	}
	if err := e.bindPod(ctx, pod, args.Node, ann); err != nil {
		switch {
		case req.Empty(): // nothing charged: kube-scheduler's retry settles it
		case provesUnbound(err) || errors.Is(err, ErrNotLeader): // refused, or never sent
			logger.V(2).Info("Bind failed; releasing the pod's charge", "pod", klog.KObj(pod), "node", args.Node, "err", err)
			e.cache.ForgetPod(pod.UID)
			e.metrics.rollbacks.Inc()
		default:
			settling = true
			e.settle(logger, pod, &req, args.Node, ann)
			return fmt.Errorf("%w (outcome unknown: the pod keeps its GPU memory on %s until the API server tells)", err, args.Node)
		}
		return err
	}
	e.learn(pod, &req)  // now that the pod is bound
	e.endHold(ctx, pod) // a preemptor bound: what it held is its own now
	e.metrics.binds.Add(1)
	e.recordAssigned(pod, args.Node, ann)
	return nil
}

// readPod returns the pod to bind: the informer's copy when it has the pod kube-scheduler names
// (same UID), which saves an API call per bind, else the API server's. A stale copy is safe: the
// Binding carries the UID as a precondition and fails on a pod bound or deleted meanwhile, and
// bindPod reads the API then. The returned pod must not be modified.
func (e *Extender) readPod(ctx context.Context, args *extenderv1.ExtenderBindingArgs) (*v1.Pod, error) {
	if e.pods != nil && args.PodUID != "" {
		if pod, err := e.pods.Pods(args.PodNamespace).Get(args.PodName); err == nil && pod.UID == args.PodUID {
			return pod, nil
		}
	}
	return e.client.CoreV1().Pods(args.PodNamespace).Get(ctx, args.PodName, metav1.GetOptions{})
}

// target is the node a bind places its pod on: its name, the snapshot the bind read once
// (nil: the cache does not know it), and the view it was read through, for planning again
// after a concurrent bind charged the cards first.
type target struct {
	name   string
	node   *placement.NodeInfo
	lookup func(name string) (*placement.NodeInfo, bool)
}

// targetOf reads node name once through the bind's view of the cache (the holds applied).
func (e *Extender) targetOf(pod *v1.Pod, name string) target {
	lookup := e.nodeView(verbBind, pod.UID).Node
	node, _ := lookup(name)
	return target{name: name, node: node, lookup: lookup}
}

// place charges the pod's GPU(s) on t and returns the placement annotations for its Binding.
// When they cannot be made the charge goes.
func (e *Extender) place(ctx context.Context, pod *v1.Pod, req *contract.PodRequest, t target) (map[string]string, error) {
	alloc, err := e.assume(ctx, pod, req, t)
	if err != nil {
		return nil, err
	}
	ann, err := e.placementAnnotations(req, t.node, alloc)
	if err != nil {
		e.cache.ForgetPod(pod.UID)
		return nil, err
	}
	klog.FromContext(ctx).V(2).Info("Placed pod", "pod", klog.KObj(pod), "node", t.name, "allocation", alloc)
	return ann, nil
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
func (e *Extender) assume(ctx context.Context, pod *v1.Pod, req *contract.PodRequest, t target) (contract.Allocation, error) {
	nodeName := t.name
	if p, ok := e.cache.Pod(pod.UID); ok {
		switch {
		case p.Node == nodeName && p.Allocation != nil:
			return p.Allocation, nil
		case p.State == placement.PodAssumed && p.Node != nodeName && !e.inflight.others(pod.UID):
			// Left by a bind that has ended: one whose outcome could not be settled (the
			// assumption is void), or one that bound the pod after this bind read it and before
			// the informer confirmed it (the assumption is the truth). Only a fresh read tells.
			cur, err := e.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("read pod again: %w", err)
			}
			if cur.UID == pod.UID && cur.Spec.NodeName != "" {
				return nil, fmt.Errorf("%w (%s)", ErrAlreadyBound, cur.Spec.NodeName)
			}
			e.cache.ForgetPod(pod.UID)
		}
	}
	if t.node == nil {
		return nil, fmt.Errorf("%w: %s", cache.ErrUnknownNode, nodeName)
	}
	d := placement.NewDecision(e.policy, req, podResources(pod))
	c, err := d.Place(t.node, e.names.UnitLabel())
	if err != nil {
		return nil, err
	}
	charge := func(node string, alloc contract.Allocation) (contract.Allocation, error) {
		return e.cache.AssumePod(pod, req, node, alloc)
	}
	return d.Assume(c, t.lookup, charge, e.names.UnitLabel())
}

// placementAnnotations are the contract's annotations for alloc on node (the cards' capacities
// come from it).
func (e *Extender) placementAnnotations(req *contract.PodRequest, node *placement.NodeInfo, alloc contract.Allocation) (map[string]string, error) {
	gpuUnits := map[int]int64{}
	for _, g := range node.GPUs {
		gpuUnits[g.Index] = g.Capacity
	}
	return contract.PlacementAnnotations(alloc, req, gpuUnits, e.now())
}

// bindPod creates the Binding, carrying ann for the API server to copy onto the pod. A conflict
// because the pod got bound to this very node by an earlier attempt counts as success. The
// fence comes first: a replica that does not lead now by its own clock sends nothing and
// returns ErrNotLeader (its decision may rest on a cache another leader has moved past). A
// leader's Binding carries its fence token, which the API server checks against the Lease,
// and is dropped unsent if it still waits in client-go's rate limiter when the fence expires.
func (e *Extender) bindPod(ctx context.Context, pod *v1.Pod, node string, ann map[string]string) error {
	ctx, cancel, token, err := e.fenced(ctx)
	if err != nil {
		return fmt.Errorf("bind %s to %s: %w; nothing sent", klog.KObj(pod), node, err)
	}
	defer cancel()
	b := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Annotations: withFence(ann, token)},
		Target:     v1.ObjectReference{Kind: "Node", Name: node},
	}
	err = e.client.CoreV1().Pods(pod.Namespace).Bind(ctx, b, metav1.CreateOptions{})
	if err == nil {
		return nil
	}
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		if cur, gerr := e.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{}); gerr == nil && cur.UID == pod.UID && cur.Spec.NodeName == node {
			return nil
		}
	}
	if refusedAtFence(err) {
		e.metrics.fenceRefused.Inc()
		return fmt.Errorf("bind %s to %s: %w (refused at the fence: token %q is not the Lease's; another replica leads)", klog.KObj(pod), node, err, token)
	}
	return fmt.Errorf("bind %s to %s: create binding: %w", klog.KObj(pod), node, err)
}
