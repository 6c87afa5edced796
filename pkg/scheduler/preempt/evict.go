package preempt

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// podObject is the API's pod namespace/name with uid: the informer's (pending pods), else the
// API server's.
func (p *Preemptor) podObject(ctx context.Context, namespace, name string, uid types.UID) (*v1.Pod, bool) {
	if p.pods != nil {
		if pod, err := p.pods.Pods(namespace).Get(name); err == nil && pod.UID == uid {
			return pod, true
		}
	}
	pod, err := p.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	return pod, err == nil && pod.UID == uid
}

// checkEvictions asks the API server, in a dry run, whether every victim may be evicted; it
// returns those a PodDisruptionBudget protects, with the API server's reason.
func (p *Preemptor) checkEvictions(ctx context.Context, victims []placement.PodInfo) (map[types.UID]string, error) {
	blocked := map[types.UID]string{}
	for _, v := range victims {
		err := p.dryRunEvict(ctx, &v)
		switch {
		case err == nil, apierrors.IsNotFound(err):
		case apierrors.IsTooManyRequests(err):
			blocked[v.UID] = v.Key() + ": " + err.Error()
		default:
			return nil, fmt.Errorf("dry-run eviction of %s: %w", v.Key(), err)
		}
	}
	return blocked, nil
}

// dryRunEvict asks the Eviction API, in a dry run, whether the victim may be evicted now (its
// PodDisruptionBudgets). The extender never evicts for real: its account may not
// (config/admission/extender-pods.yaml); removeVictim deletes.
func (p *Preemptor) dryRunEvict(ctx context.Context, v *placement.PodInfo) error {
	ev := &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Namespace: v.Namespace, Name: v.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &v.UID},
			DryRun: []string{metav1.DryRunAll}},
	}
	// A PodDisruptionBudget's refusal is a 429 with Retry-After: 10, which client-go's Evict
	// would wait out and retry ten times. The extender wants the answer at once (it then plans
	// around that pod), so it posts the Eviction without retries where it can. The dry run is
	// also the request's (?dryRun=All): admission sees request.dryRun only from there, not from
	// the Eviction's body, and the extender's policy admits no other eviction. (client-go's
	// Evict cannot send it; that path serves fake clients only.)
	if rc, ok := p.client.PolicyV1().RESTClient().(*rest.RESTClient); ok && rc != nil {
		return rc.Post().AbsPath("/api/v1").Namespace(v.Namespace).Resource("pods").Name(v.Name).SubResource("eviction").
			Param("dryRun", metav1.DryRunAll).MaxRetries(0).Body(ev).Do(ctx).Error() //nolint:wrapcheck // the callers say which pod
	}
	return p.client.PolicyV1().Evictions(v.Namespace).Evict(ctx, ev) //nolint:wrapcheck // the callers say which pod
}

// removeVictim removes the victim v for pod: it marks v preempted by pod
// (contract.AnnotationPreemptedBy, a fenced patch as the hold is), then deletes it with a UID
// precondition and its own grace period, as kube-scheduler's preemption deletes its victims.
// The mark is what config/admission/extender-pods.yaml checks before it lets the extender's
// account delete a pod; the delete itself carries no token (a DELETE has no annotations) but
// is dropped unsent past this replica's fence, and a replica that no longer leads sends
// neither. The PodDisruptionBudgets were checked by the dry run before the hold was written.
func (p *Preemptor) removeVictim(ctx context.Context, pod *v1.Pod, v *placement.PodInfo) error {
	mark := map[string]any{contract.AnnotationPreemptedBy: preemptedBy(pod)}
	if err := p.fence.PatchPod(ctx, v.Namespace, v.Name, v.UID, mark); err != nil {
		return fmt.Errorf("mark %s preempted by %s: %w", v.Key(), klog.KObj(pod), err)
	}
	ctx, cancel, _, err := p.fence.Context(ctx)
	if err != nil {
		return fmt.Errorf("delete %s: %w", v.Key(), err)
	}
	defer cancel()
	if err := p.client.CoreV1().Pods(v.Namespace).Delete(ctx, v.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(v.UID))}); err != nil {
		return fmt.Errorf("delete %s: %w", v.Key(), err)
	}
	return nil
}

// preemptedBy is the value of contract.AnnotationPreemptedBy naming pod:
// "<namespace>/<name>/<priority>".
func preemptedBy(pod *v1.Pod) string {
	return pod.Namespace + "/" + pod.Name + "/" + strconv.Itoa(int(cache.PodPriority(pod)))
}

// evictVictims removes plan's victims for pod, whose hold is written and in force (rec), and
// records what it did: a preemption counts as started once one victim is removed.
func (p *Preemptor) evictVictims(ctx context.Context, pod *v1.Pod, plan *placement.PreemptionPlan, rec *HoldRecord) error {
	var evicted []string
	var errs []error
	for i := range plan.Victims {
		v := &plan.Victims[i]
		switch err := p.removeVictim(ctx, pod, v); {
		case apierrors.IsNotFound(err): // gone meanwhile: its memory is free, nothing evicted
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		}
		evicted = append(evicted, v.Key())
		p.metrics.victims.Inc()
		p.metrics.unitsEvicted.Add(float64(v.Allocation.PerGPU()[plan.Index]))
		p.recordPreempted(ctx, pod, plan, v)
	}
	if len(evicted) > 0 {
		p.metrics.preemptions.Inc()
	}
	p.recordPreempting(ctx, pod, plan, rec, evicted)
	return errors.Join(errs...)
}
