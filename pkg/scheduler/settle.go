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

	"github.com/gpushare/gpushare/pkg/contract"
)

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
func WithSettleOptions(o SettleOptions) Option { return func(e *Extender) { e.settleOpts = o } }

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
			if errors.Is(err, ErrNotLeader) {
				err = e.settleByRead(ctx, pod, node) // the fence stops the writes, not the reads
			}
			switch {
			case err == nil:
				logger.Info("Bind with an unknown outcome settled: the pod is bound", "attempts", attempt)
				e.learn(pod, req)
				e.endHold(klog.NewContext(ctx, logger), pod)
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
