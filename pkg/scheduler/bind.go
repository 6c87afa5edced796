package scheduler

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/scheduler/fence"
)

// ErrAlreadyBound: the pod is bound to another node than the one asked.
var ErrAlreadyBound = errors.New("pod is already bound to another node")

// Bind chooses the pod's GPU(s) on the node, charges them in the cache and creates the Binding
// with the placement annotations on it: the API server copies a Binding's annotations onto the
// pod in the same update that sets spec.nodeName, so a pod is never bound without its placement
// nor annotated without being bound, and one API call binds it. A failure that proves the pod
// unbound releases the charge; a Binding failure with an unknown outcome keeps the charge and
// settles it in the background (Extender.settle). A pod already bound to the node, or already
// assumed there, keeps its placement.
func (e *Extender) Bind(ctx context.Context, args *extenderv1.ExtenderBindingArgs) error {
	logger := klog.FromContext(ctx)
	if !e.fence.WaitLag(ctx) {
		return fmt.Errorf("bind %s/%s: %w (leader: %q); kube-scheduler will retry", args.PodNamespace, args.PodName, fence.ErrNotLeader, e.leadership.Leader())
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
	if err := e.checkBind(pod, &req, args.Node, t.node, t.node != nil); err != nil {
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
		case provesUnbound(err) || errors.Is(err, fence.ErrNotLeader): // refused, or never sent
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
	e.learn(pod, &req)          // now that the pod is bound
	e.preempt.EndHold(ctx, pod) // a preemptor bound: what it held is its own now
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
	ctx, cancel, token, err := e.fence.Context(ctx)
	if err != nil {
		return fmt.Errorf("bind %s to %s: %w; nothing sent", klog.KObj(pod), node, err)
	}
	defer cancel()
	b := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Annotations: fence.WithToken(ann, token)},
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
	if fence.Refused(err) {
		e.metrics.fenceRefused.Inc()
		return fmt.Errorf("bind %s to %s: %w (refused at the fence: token %q is not the Lease's; another replica leads)", klog.KObj(pod), node, err, token)
	}
	return fmt.Errorf("bind %s to %s: create binding: %w", klog.KObj(pod), node, err)
}

// Leading reports whether this replica binds: it leads, or runs without leader election.
func (e *Extender) Leading() bool { return e.fence.Leading() }

// learn tells a learning policy about a pod the extender bound, once per pod: the caller is a
// bind or settler of the pod under way (inflight), and only the first to see it bound teaches.
func (e *Extender) learn(pod *v1.Pod, req *contract.PodRequest) {
	if l, ok := e.policy.(placement.Learner); ok && !req.Empty() && e.inflight.learnOnce(pod.UID) {
		l.Observe(req, podResources(pod))
	}
}

// A Binding call that fails may still have bound the pod: a timeout, a cancelled context, a
// refused or reset connection or a 5xx answer says nothing about what the API server did. The
// extender then keeps the pod's charge and settles the outcome in the background, with a
// context of its own: it creates the Binding again until the API server answers for sure. Only
// a pod the API server shows unbound (a definite refusal) is released. Settling never uses the
// request's context, which kube-scheduler may have cancelled. The placement annotations travel
// on the Binding, so there are never annotations to clean up.

// SettleOptions bound the settling of unknown outcomes.
type SettleOptions struct {
	// FirstRetry is the wait before the first retry; it doubles up to MaxRetry.
	FirstRetry, MaxRetry time.Duration
	// Timeout ends settling; a pod still unsettled then keeps its charge until the informer
	// reports it bound or deleted, or a later bind finds it unbound.
	Timeout time.Duration
}

// DefaultSettleOptions: retries from 200 ms to 5 s for 2 minutes, longer than kube-apiserver's
// default request timeout (60 s), so that a Binding still in flight on the server has ended.
func DefaultSettleOptions() SettleOptions {
	return SettleOptions{FirstRetry: 200 * time.Millisecond, MaxRetry: 5 * time.Second, Timeout: 2 * time.Minute}
}

// WithSettleOptions sets how unknown bind outcomes are settled.
func WithSettleOptions(s SettleOptions) Option { return func(o *options) { o.ext.settleOpts = s } }

// provesUnbound reports whether err, from creating a Binding, proves that the
// API server did not apply the request: an API status with a 4xx code other than 408 (the
// server refused it). Anything else may hide a request that was applied.
func provesUnbound(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return false
	}
	code := status.Status().Code
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout
}

// inflight tracks the pods whose bind (or settling) is under way, so that a later bind can
// tell an assumption left by a bind that gave up from one still being decided. Safe for
// concurrent use.
type inflight struct {
	mu   sync.Mutex // guards pods
	pods map[types.UID]*inflightPod
	wg   sync.WaitGroup // settlers and clean-ups running
}

// inflightPod is one pod's binds under way.
type inflightPod struct {
	count   int  // binds and settlers under way
	learned bool // one of them had the policy learn the pod
}

func (f *inflight) begin(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pods == nil {
		f.pods = map[types.UID]*inflightPod{}
	}
	if f.pods[uid] == nil {
		f.pods[uid] = &inflightPod{}
	}
	f.pods[uid].count++
}

func (f *inflight) end(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p := f.pods[uid]; p != nil {
		if p.count--; p.count <= 0 {
			delete(f.pods, uid)
		}
	}
}

// learnOnce reports whether the caller, a bind or settler of uid under way, is the first of
// them to have the pod learned (a retried bind and a settler may both see it bound).
func (f *inflight) learnOnce(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.pods[uid]
	if p == nil || p.learned {
		return false
	}
	p.learned = true
	return true
}

// others reports whether a bind or settling of uid is under way besides the caller's own.
func (f *inflight) others(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pods[uid] != nil && f.pods[uid].count > 1
}

// busy reports whether a bind or settling of uid is under way.
func (f *inflight) busy(uid types.UID) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.pods[uid] != nil
}

// WaitSettled waits until every settling under way has ended or ctx is done.
func (e *Extender) WaitSettled(ctx context.Context) {
	done := make(chan struct{})
	go func() { e.inflight.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// settle finishes, in the background, a bind whose Binding call failed with an unknown outcome.
// The pod's charge stays while it creates the Binding again (a Binding that had landed answers
// Conflict, which bindPod takes as success): bound, it keeps the charge for the informer to
// confirm and learns the pod; refused for sure, it releases the charge; gone, it forgets it.
// ann are the placement annotations of the first Binding, sent again unchanged. The caller has
// called inflight.begin for the pod; settle ends it.
func (e *Extender) settle(logger klog.Logger, pod *v1.Pod, req *contract.PodRequest, node string, ann map[string]string) {
	e.metrics.unsettled.Add(1)
	e.inflight.wg.Add(1)
	go func() {
		defer e.inflight.wg.Done()
		defer e.inflight.end(pod.UID)
		ctx, cancel := context.WithTimeout(context.Background(), e.settleOpts.Timeout)
		defer cancel()
		logger = logger.WithValues("pod", klog.KObj(pod), "node", node)
		delay := e.settleOpts.FirstRetry
		for attempt := 1; ; attempt++ {
			err := e.bindPod(ctx, pod, node, ann)
			if errors.Is(err, fence.ErrNotLeader) {
				err = e.settleByRead(ctx, pod, node) // the fence stops the writes, not the reads
			}
			switch {
			case err == nil:
				logger.Info("Bind with an unknown outcome settled: the pod is bound", "attempts", attempt)
				e.learn(pod, req)
				e.preempt.EndHold(klog.NewContext(ctx, logger), pod)
				e.metrics.settledBound.Add(1)
				return
			case apierrors.IsNotFound(err):
				logger.Info("Bind with an unknown outcome settled: the pod is gone", "attempts", attempt)
				e.cache.ForgetPod(pod.UID)
				e.metrics.settledReleased.Add(1)
				return
			case provesUnbound(err):
				logger.Info("Bind with an unknown outcome settled: the API server refused it; releasing the pod's charge", "attempts", attempt, "err", err)
				e.cache.ForgetPod(pod.UID)
				e.metrics.settledReleased.Add(1)
				return
			}
			select {
			case <-ctx.Done():
				logger.Info("Could not settle a bind with an unknown outcome; the pod keeps its charge until the informer or a later bind shows where it is", "attempts", attempt, "err", err)
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, e.settleOpts.MaxRetry)
		}
	}()
}

// errStillUnbound: the pod is still unbound; its first Binding may yet land.
var errStillUnbound = errors.New("the pod is still unbound")

// settleByRead settles, by reading the pod, a bind of unknown outcome on a replica whose
// leadership is no longer current (it may not write a Binding again): nil when the pod is
// bound to node, a NotFound error when it is gone or bound elsewhere (the informer then puts it
// where it is), errStillUnbound otherwise: the first Binding may still be in flight on the API
// server, so the charge stays.
func (e *Extender) settleByRead(ctx context.Context, pod *v1.Pod, node string) error {
	cur, err := e.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	switch {
	case err != nil:
		return fmt.Errorf("read pod %s: %w", klog.KObj(pod), err)
	case cur.UID != pod.UID || (cur.Spec.NodeName != "" && cur.Spec.NodeName != node):
		return apierrors.NewNotFound(v1.Resource("pods"), pod.Name)
	case cur.Spec.NodeName == node:
		return nil
	}
	return fmt.Errorf("settle %s: %w (not leading: no Binding sent again)", klog.KObj(pod), errStillUnbound)
}
