package scheduler

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// GPU preemption (docs/design.md, "Preemption"). kube-scheduler's own preemption cannot free a
// card: its dry run sees gpu-mem only as a node total and does not call extenders, so on a node
// whose total fits but no card does it finds no victim at all, and elsewhere it keeps victims
// while the node total fits, which need not free any single card. The extender therefore
// preempts for a pod asking gpu-mem itself:
//   - from filter, when the pod fits none of the candidate nodes kube-scheduler sent (their
//     CPU, memory and the gpu-mem total fit; no card does), and
//   - from the preempt verb, on the nodes kube-scheduler's dry run proposes (where the gpu-mem
//     total did not fit either).
// It picks the card and victims that cost least over those nodes (placement.PlanPreemption),
// checks every eviction first (a dry run through the Eviction API: PodDisruptionBudgets), writes
// the hold on the preemptor (holds.go), then removes the victims with their own grace periods:
// each is marked gpushare.io/preempted-by "<preemptor namespace>/<name>/<priority>" (under the
// fence) and deleted, as kube-scheduler's own preemption deletes its victims (a DELETE with a
// UID precondition, not an eviction). That mark is what lets the API server bound what the
// extender's account may remove (config/admission/extender-pods.yaml): only pods that ask
// gpu-mem, below ProtectedPriority, marked with a priority above their own; a real eviction is
// refused. The preempt verb then answers no GPU victims for kube-scheduler to delete: the pods
// it would add for other resources (CPU, memory) are passed back on the node the extender
// chose, or nothing.

// Event reasons of preemption.
const (
	// ReasonPreempting: a pod evicts pods from a card to fit there (on the preemptor).
	ReasonPreempting = "GPUPreempting"
	// ReasonPreempted: a pod is evicted so that a higher-priority pod fits its card (on the victim).
	ReasonPreempted = "GPUPreempted"
	// ReasonPreemptionFailed: a pod that fits no card cannot preempt, and why.
	ReasonPreemptionFailed = "GPUPreemptionFailed"
)

// DefaultHoldSlack is how long a hold outlasts its victims' longest grace period.
const DefaultHoldSlack = time.Minute

// MaxHold bounds any hold: a preemptor not bound by then competes like any other pod.
const MaxHold = 10 * time.Minute

// ProtectedPriority is the lowest priority the extender never preempts: the highest a user's
// PriorityClass may have (1000000000) and the system classes above it (system-cluster-critical,
// system-node-critical). config/admission/extender-pods.yaml refuses the extender's deletion of
// such a pod, so the planner does not choose one.
const ProtectedPriority int32 = 1_000_000_000

// maxPreemptionTries bounds how often a preemption plans again after a PodDisruptionBudget
// refused one of its victims.
const maxPreemptionTries = 5

// WithPreemption turns the extender's GPU preemption on or off (on by default).
func WithPreemption(on bool) Option { return func(e *Extender) { e.preemption = on } }

// Preempt answers kube-scheduler's preempt verb. For a pod asking gpu-mem the extender
// preempts itself (preemptGPU) over the proposed nodes, and answers only the victims without
// gpu-mem that kube-scheduler proposed on the node it chose (for CPU or memory), or none. For
// a pod without gpu-mem the proposal stands where the node is known.
func (e *Extender) Preempt(ctx context.Context, args *extenderv1.ExtenderPreemptionArgs) *extenderv1.ExtenderPreemptionResult {
	out := &extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{}}
	e.metrics.preempts.Add(1)
	if args.Pod == nil {
		return out
	}
	req, err := contract.ParseRequest(args.Pod, &e.names)
	if err != nil {
		return out
	}
	proposed := metaVictims(args)
	if req.Empty() {
		return &extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: proposed}
	}
	if !e.preemption {
		return e.keepFeasible(args.Pod, &req, proposed)
	}
	names := make([]string, 0, len(proposed))
	for name := range proposed {
		names = append(names, name)
	}
	plan, ok := e.preemptGPU(ctx, args.Pod, &req, names)
	if !ok {
		return out
	}
	// The victims kube-scheduler proposed there that hold no gpu-mem were needed for other
	// resources: kube-scheduler deletes those.
	if mv := proposed[plan.Node]; mv != nil {
		node, _ := e.cache.Node(plan.Node)
		var other []*extenderv1.MetaPod
		for _, p := range mv.Pods {
			if !holdsGPUMem(node, types.UID(p.UID)) {
				other = append(other, p)
			}
		}
		if len(other) > 0 {
			out.NodeNameToMetaVictims[plan.Node] = &extenderv1.MetaVictims{Pods: other, NumPDBViolations: 0}
		}
	}
	klog.FromContext(ctx).V(2).Info("Preempt", "pod", klog.KObj(args.Pod), "node", plan.Node, "victimsForKubeScheduler", len(out.NodeNameToMetaVictims))
	return out
}

// keepFeasible keeps, of kube-scheduler's proposal, the nodes where the pod's GPU memory fits
// once the proposed victims are gone (the answer with --gpu-preemption=false).
func (e *Extender) keepFeasible(pod *v1.Pod, req *contract.PodRequest, proposed map[string]*extenderv1.MetaVictims) *extenderv1.ExtenderPreemptionResult {
	out := &extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{}}
	d := placement.NewDecision(e.policy, req, podResources(pod))
	var plan placement.Plan
	for name, mv := range proposed {
		uids := make([]types.UID, 0, len(mv.Pods))
		for _, p := range mv.Pods {
			uids = append(uids, types.UID(p.UID))
		}
		if node, ok := e.cache.NodeWithout(name, uids); ok && d.Feasible(node, &plan) {
			out.NodeNameToMetaVictims[name] = mv
		}
	}
	return out
}

// holdsGPUMem reports whether the pod of uid holds gpu-mem on node.
func holdsGPUMem(node *placement.NodeInfo, uid types.UID) bool {
	if node == nil {
		return false
	}
	for i := range node.Pods {
		if node.Pods[i].UID == uid {
			return true
		}
	}
	return false
}

// metaVictims returns the victims by UID, whichever form the request used.
func metaVictims(args *extenderv1.ExtenderPreemptionArgs) map[string]*extenderv1.MetaVictims {
	if args.NodeNameToMetaVictims != nil {
		return args.NodeNameToMetaVictims
	}
	out := map[string]*extenderv1.MetaVictims{}
	for name, v := range args.NodeNameToVictims {
		mv := &extenderv1.MetaVictims{NumPDBViolations: v.NumPDBViolations}
		for _, p := range v.Pods {
			mv.Pods = append(mv.Pods, &extenderv1.MetaPod{UID: string(p.UID)})
		}
		out[name] = mv
	}
	return out
}

// preemptTimeout bounds a preemption started by filter (its API calls).
const preemptTimeout = 30 * time.Second

// preemptInBackground starts a GPU preemption for pod, which fits none of names, over the nodes
// where only the cards' free memory stood in the way (failures[i] not unresolvable): filter
// answers at once, and kube-scheduler retries the pod once the victims are gone. Filter calls
// it only for a pod without a hold (a held pod gets waitingForVictims); preemptGPU checks again.
func (e *Extender) preemptInBackground(ctx context.Context, pod *v1.Pod, req *contract.PodRequest, names []string, failures []*placement.FitError) {
	var candidates []string
	for i, fe := range failures {
		if fe != nil && !fe.Unresolvable {
			candidates = append(candidates, names[i]) // a copy: names go back to their pool
		}
	}
	if len(candidates) == 0 {
		return
	}
	r := *req
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), preemptTimeout)
	go func() {
		defer cancel()
		e.preemptGPU(ctx, pod, &r, candidates)
	}()
}

// podObject is the API's pod namespace/name with uid: the informer's (pending pods), else the
// API server's.
func (e *Extender) podObject(ctx context.Context, namespace, name string, uid types.UID) (*v1.Pod, bool) {
	if e.pods != nil {
		if p, err := e.pods.Pods(namespace).Get(name); err == nil && p.UID == uid {
			return p, true
		}
	}
	p, err := e.client.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	return p, err == nil && p.UID == uid
}

// checkEvictions asks the API server, in a dry run, whether every victim may be evicted; it
// returns those a PodDisruptionBudget protects, with the API server's reason.
func (e *Extender) checkEvictions(ctx context.Context, victims []placement.PodInfo) (map[types.UID]string, error) {
	blocked := map[types.UID]string{}
	for _, v := range victims {
		err := e.dryRunEvict(ctx, &v)
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
func (e *Extender) dryRunEvict(ctx context.Context, v *placement.PodInfo) error {
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
	if rc, ok := e.client.PolicyV1().RESTClient().(*rest.RESTClient); ok && rc != nil {
		return rc.Post().AbsPath("/api/v1").Namespace(v.Namespace).Resource("pods").Name(v.Name).SubResource("eviction").
			Param("dryRun", metav1.DryRunAll).MaxRetries(0).Body(ev).Do(ctx).Error() //nolint:wrapcheck // the callers say which pod
	}
	return e.client.PolicyV1().Evictions(v.Namespace).Evict(ctx, ev) //nolint:wrapcheck // the callers say which pod
}

// removeVictim removes the victim v for pod: it marks v preempted by pod
// (contract.AnnotationPreemptedBy, a fenced patch as the hold is), then deletes it with a UID
// precondition and its own grace period, as kube-scheduler's preemption deletes its victims.
// The mark is what config/admission/extender-pods.yaml checks before it lets the extender's
// account delete a pod; the delete itself carries no token (a DELETE has no annotations) but
// is dropped unsent past this replica's fence, and a replica that no longer leads sends
// neither. The PodDisruptionBudgets were checked by the dry run before the hold was written.
func (e *Extender) removeVictim(ctx context.Context, pod *v1.Pod, v *placement.PodInfo) error {
	mark := map[string]any{contract.AnnotationPreemptedBy: preemptedBy(pod)}
	if err := e.patchFenced(ctx, v.Namespace, v.Name, v.UID, mark); err != nil {
		return fmt.Errorf("mark %s preempted by %s: %w", v.Key(), klog.KObj(pod), err)
	}
	ctx, cancel, _, err := e.fenced(ctx)
	if err != nil {
		return fmt.Errorf("delete %s: %w", v.Key(), err)
	}
	defer cancel()
	if err := e.client.CoreV1().Pods(v.Namespace).Delete(ctx, v.Name, metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions(string(v.UID))}); err != nil {
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
func (e *Extender) evictVictims(ctx context.Context, pod *v1.Pod, plan *placement.PreemptionPlan, rec *HoldRecord) error {
	var evicted []string
	var errs []error
	for i := range plan.Victims {
		v := &plan.Victims[i]
		switch err := e.removeVictim(ctx, pod, v); {
		case apierrors.IsNotFound(err): // gone meanwhile: its memory is free, nothing evicted
			continue
		case err != nil:
			errs = append(errs, err)
			continue
		}
		evicted = append(evicted, v.Key())
		e.metrics.victims.Inc()
		e.metrics.unitsEvicted.Add(float64(v.Allocation.PerGPU()[plan.Index]))
		if e.recorder != nil {
			if obj, ok := e.podObject(ctx, v.Namespace, v.Name, v.UID); ok {
				e.recorder.Eventf(obj, pod, v1.EventTypeNormal, ReasonPreempted, "Preempting",
					"Preempted by %s (priority %d) to free GPU %d on node %s", klog.KObj(pod), cache.PodPriority(pod), plan.Index, plan.Node)
			}
		}
	}
	if len(evicted) > 0 {
		e.metrics.preemptions.Inc()
	}
	e.recordPreempting(ctx, pod, plan, rec, evicted)
	return errors.Join(errs...)
}

// recordPreempting tells, in an event on pod and the log, what its preemption did.
func (e *Extender) recordPreempting(ctx context.Context, pod *v1.Pod, plan *placement.PreemptionPlan, rec *HoldRecord, evicted []string) {
	until, unit := rec.Until.Format(time.RFC3339), e.names.UnitLabel()
	var msg string
	switch {
	case len(plan.Victims) > 0:
		msg = fmt.Sprintf("Preempting %s on node %s GPU %d: frees %d of the %d %s needed there (the card is held for this pod until %s)",
			strings.Join(evicted, ", "), plan.Node, plan.Index, plan.Units, plan.Need, unit, until)
	case len(plan.Waiting) > 0:
		msg = fmt.Sprintf("Waiting on node %s GPU %d for terminating pods to free the %d %s needed (the card is held for this pod until %s)",
			plan.Node, plan.Index, plan.Need, unit, until)
	default: // fits now: memory freed since kube-scheduler looked
		klog.FromContext(ctx).V(2).Info("Preemption not needed: memory freed meanwhile is held for the pod", "pod", klog.KObj(pod),
			"node", plan.Node, "gpu", plan.Index, "units", plan.Need)
		return
	}
	if e.recorder != nil {
		e.recorder.Eventf(pod, nil, v1.EventTypeNormal, ReasonPreempting, "Preempting", "%s", msg)
	}
	klog.FromContext(ctx).Info("Preempting", "pod", klog.KObj(pod), "node", plan.Node, "gpu", plan.Index, "victims", evicted, "units", plan.Units, "need", plan.Need)
}

// preemptionFailed records why pod cannot preempt: an event at most once per
// preemptionEventEvery per pod and reason.
func (e *Extender) preemptionFailed(pod *v1.Pod, why string) {
	key := string(pod.UID) + "/" + why
	now := e.now()
	if last, ok := e.preemptionEvents.Load(key); ok && now.Sub(last.(time.Time)) < preemptionEventEvery {
		return
	}
	e.preemptionEvents.Store(key, now)
	e.metrics.preemptionsFailed.Inc()
	if e.recorder != nil {
		e.recorder.Eventf(pod, nil, v1.EventTypeWarning, ReasonPreemptionFailed, "Preempting", "Cannot free a GPU for this pod: %s", why)
	}
}

// preemptionEventEvery spaces a pod's GPUPreemptionFailed events of one reason.
const preemptionEventEvery = time.Minute

// joinReasons lists a map's reasons.
func joinReasons(m map[types.UID]string) string {
	out := make([]string, 0, len(m))
	for _, why := range m {
		out = append(out, why)
	}
	return strings.Join(out, "; ")
}
