package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
// the hold on the preemptor (holds.go), then evicts them with their own grace periods. The
// preempt verb then answers no GPU victims for kube-scheduler to delete: the pods it would add
// for other resources (CPU, memory) are passed back on the node the extender chose, or nothing.

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

// preemptGPU frees a card for pod on one of names, if the pod may preempt and some card can be
// freed: it returns the plan it carried out. A pod with a hold in force, or a preemption in
// progress, preempts nothing more. Only the leader preempts.
func (e *Extender) preemptGPU(ctx context.Context, pod *v1.Pod, req *contract.PodRequest, names []string) (placement.PreemptionPlan, bool) {
	logger := klog.FromContext(ctx)
	if !e.Leading() || len(names) == 0 {
		return placement.PreemptionPlan{}, false
	}
	if h, ok := e.holds.of(pod.UID); ok {
		logger.V(4).Info("Preemption already holds a card for the pod", "pod", klog.KObj(pod), "node", h.Node, "gpu", h.GPU)
		return placement.PreemptionPlan{}, false
	}
	if _, busy := e.preempting.LoadOrStore(pod.UID, struct{}{}); busy {
		return placement.PreemptionPlan{}, false
	}
	defer e.preempting.Delete(pod.UID)
	if pod.Spec.PreemptionPolicy != nil && *pod.Spec.PreemptionPolicy == v1.PreemptNever {
		e.preemptionFailed(pod, "its preemptionPolicy is Never")
		return placement.PreemptionPlan{}, false
	}
	if placement.PreemptionUnsupported(req) {
		e.preemptionFailed(pod, "only pods of one container on one card preempt")
		return placement.PreemptionPlan{}, false
	}
	priority := cache.PodPriority(pod)
	protected := map[types.UID]string{} // victims a PodDisruptionBudget protects, and why
	for range maxPreemptionTries {
		plan, ok := e.planPreemption(pod, req, priority, names, protected)
		if !ok {
			why := "no pod of lower priority frees enough of one card on any candidate node"
			if len(protected) > 0 {
				why += "; evictions refused: " + joinReasons(protected)
			}
			e.preemptionFailed(pod, why)
			return placement.PreemptionPlan{}, false
		}
		blocked, err := e.checkEvictions(ctx, plan.Victims)
		if err != nil {
			logger.Error(err, "Preemption: checking the evictions failed", "pod", klog.KObj(pod), "node", plan.Node)
			return placement.PreemptionPlan{}, false
		}
		if len(blocked) > 0 {
			for uid, why := range blocked {
				protected[uid] = why
			}
			continue
		}
		if err := e.startPreemption(ctx, pod, &plan); err != nil {
			logger.Error(err, "Preemption failed", "pod", klog.KObj(pod), "node", plan.Node, "gpu", plan.Index)
			return placement.PreemptionPlan{}, false
		}
		return plan, true
	}
	e.preemptionFailed(pod, "evictions refused: "+joinReasons(protected))
	return placement.PreemptionPlan{}, false
}

// planPreemption is the cheapest plan over names, as pod sees them (other pods' holds count).
func (e *Extender) planPreemption(pod *v1.Pod, req *contract.PodRequest, priority int32, names []string, protected map[types.UID]string) (placement.PreemptionPlan, bool) {
	info := func(p *placement.PodInfo) placement.VictimInfo {
		_, blocked := protected[p.UID]
		// An assumed pod is being bound right now: not a victim (its Binding may land).
		return placement.VictimInfo{Priority: p.Priority, Terminating: p.Terminating, Protected: blocked || p.State == placement.PodAssumed}
	}
	var best placement.PreemptionPlan
	found := false
	for _, name := range names {
		node, ok := e.cache.Node(name)
		if !ok {
			continue
		}
		plan, ok := placement.PlanPreemption(e.holds.view(node, pod.UID), req, priority, info)
		if ok && (!found || plan.Compare(&best) < 0) {
			best, found = plan, true
		}
	}
	return best, found
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
		err := e.evict(ctx, &v, true)
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

// evict evicts the victim through the Eviction API (its own grace period; dryRun: only check).
func (e *Extender) evict(ctx context.Context, v *placement.PodInfo, dryRun bool) error {
	ev := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: v.Namespace, Name: v.Name},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &v.UID}},
	}
	if dryRun {
		ev.DeleteOptions.DryRun = []string{metav1.DryRunAll}
	}
	// A PodDisruptionBudget's refusal is a 429 with Retry-After: 10, which client-go's Evict
	// would wait out and retry ten times. The extender wants the answer at once (it then plans
	// around that pod), so it posts the Eviction without retries where it can.
	if rc, ok := e.client.PolicyV1().RESTClient().(*rest.RESTClient); ok && rc != nil {
		return rc.Post().AbsPath("/api/v1").Namespace(v.Namespace).Resource("pods").Name(v.Name).SubResource("eviction").
			MaxRetries(0).Body(ev).Do(ctx).Error() //nolint:wrapcheck // the callers say which pod
	}
	return e.client.PolicyV1().Evictions(v.Namespace).Evict(ctx, ev) //nolint:wrapcheck // the callers say which pod
}

// startPreemption writes the hold on the preemptor, puts it in force and evicts the victims.
func (e *Extender) startPreemption(ctx context.Context, pod *v1.Pod, plan *placement.PreemptionPlan) error {
	logger := klog.FromContext(ctx)
	grace := int64(v1.DefaultTerminationGracePeriodSeconds)
	names := make([]string, 0, len(plan.Victims))
	for _, v := range plan.Victims {
		names = append(names, v.Key())
		if obj, ok := e.podObject(ctx, v.Namespace, v.Name, v.UID); ok && obj.Spec.TerminationGracePeriodSeconds != nil {
			grace = max(grace, *obj.Spec.TerminationGracePeriodSeconds)
		}
	}
	rec := HoldRecord{Node: plan.Node, GPU: plan.Index, Units: plan.Need, Victims: names,
		Until: e.now().Add(min(MaxHold, time.Duration(grace)*time.Second+DefaultHoldSlack)).UTC().Truncate(time.Second)}
	raw, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode the hold: %w", err)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{e.names.PreemptionAnnotation: string(raw)}}})
	if err != nil {
		return fmt.Errorf("encode the hold: %w", err)
	}
	if !e.Leading() { // the fence, as before a Binding
		return fmt.Errorf("preempt for %s: %w", klog.KObj(pod), ErrNotLeader)
	}
	if _, err := e.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("write the hold on %s: %w", klog.KObj(pod), err)
	}
	e.holds.add(hold{HoldRecord: rec, pod: pod.UID, namespace: pod.Namespace, name: pod.Name})
	e.metrics.preemptions.Inc()
	var evicted []string
	var errs []error
	for i := range plan.Victims {
		v := &plan.Victims[i]
		if err := e.evict(ctx, v, false); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("evict %s: %w", v.Key(), err))
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
	msg := fmt.Sprintf("Preempting %s on node %s GPU %d: frees %d of the %d %s needed there (the card is held for this pod until %s)",
		strings.Join(evicted, ", "), plan.Node, plan.Index, plan.Units, plan.Need, e.names.UnitLabel(), rec.Until.Format(time.RFC3339))
	if len(plan.Victims) == 0 {
		msg = fmt.Sprintf("Waiting on node %s GPU %d for terminating pods to free the %d %s needed (the card is held for this pod until %s)",
			plan.Node, plan.Index, plan.Need, e.names.UnitLabel(), rec.Until.Format(time.RFC3339))
	}
	if e.recorder != nil {
		e.recorder.Eventf(pod, nil, v1.EventTypeNormal, ReasonPreempting, "Preempting", "%s", msg)
	}
	logger.Info("Preempting", "pod", klog.KObj(pod), "node", plan.Node, "gpu", plan.Index, "victims", evicted, "units", plan.Units, "need", plan.Need)
	return errors.Join(errs...)
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
