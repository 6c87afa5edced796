package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/scheduler/preempt"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// The preemption tests (issue 28) run kube-scheduler v1.37.1 with the shipped configuration,
// whose extender entry has preemptVerb, on kwok nodes. kwok deletes a pod as soon as it is being
// deleted; a victim that must stay terminating for a while carries a finalizer of the test's,
// which the test removes to end its "grace period".

// Priorities of the preemption tests.
const (
	lowPriority  = "gpushare-low"
	midPriority  = "gpushare-mid"
	highPriority = "gpushare-high"
	// highNever is high's priority with preemptionPolicy Never.
	highNever = "gpushare-high-never"
	// testFinalizer keeps a victim terminating until the test removes it.
	testFinalizer = "gpushare.io/e2e-hold"
)

// priorityClasses creates low (10), mid (100), high (1000) and high-never (1000, never preempts).
func (e *env) priorityClasses() {
	e.t.Helper()
	for name, value := range map[string]int32{lowPriority: 10, midPriority: 100, highPriority: 1000, highNever: 1000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if name == highNever {
			never := v1.PreemptNever
			pc.PreemptionPolicy = &never
		}
		if _, err := e.c.Client.SchedulingV1().PriorityClasses().Create(e.ctx, pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			e.t.Fatal(err)
		}
	}
}

// newPreemptEnv is a cluster of cards with the priority classes.
func newPreemptEnv(t *testing.T, cards map[string][]contract.GPU) *env {
	t.Helper()
	e := newEnv(t)
	e.priorityClasses()
	e.nodes(cards)
	return e
}

// prioPod is a gpu-mem pod of units with a priority class; mutate adjusts it before creation.
func (e *env) prioPod(name string, units int64, class string, mutate ...func(*v1.Pod)) *v1.Pod {
	e.t.Helper()
	p := e.gpuPod(name, units)
	p.Spec.PriorityClassName = class
	for _, m := range mutate {
		m(p)
	}
	e.create(p)
	return p
}

func withFinalizer(p *v1.Pod) { p.Finalizers = append(p.Finalizers, testFinalizer) }
func neverPreempts(p *v1.Pod) { p.Spec.PriorityClassName = highNever }
func labelled(k, v string) func(*v1.Pod) {
	return func(p *v1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[k] = v
	}
}

// cardOf is the card (NVML index) pod name holds memory on, from its annotations; -1 if none.
func (e *env) cardOf(name string) int {
	e.t.Helper()
	p, err := e.c.Client.CoreV1().Pods("default").Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	idx, ok := p.Annotations[contract.AnnotationIndex]
	if !ok {
		return -1
	}
	var i int
	if _, err := fmt.Sscanf(idx, "%d", &i); err != nil {
		e.t.Fatalf("pod %s index annotation %q: %v", name, idx, err)
	}
	return i
}

// gone reports which of names are being deleted or deleted.
func (e *env) gone(names ...string) []string {
	e.t.Helper()
	var out []string
	for _, n := range names {
		p, err := e.c.Client.CoreV1().Pods("default").Get(e.ctx, n, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			out = append(out, n)
		case err != nil:
			e.t.Fatal(err)
		case p.DeletionTimestamp != nil:
			out = append(out, n)
		}
	}
	return out
}

// release removes the test's finalizer from pod name (its grace period ends).
func (e *env) release(name string) {
	e.t.Helper()
	patch := []byte(`{"metadata":{"finalizers":null}}`)
	if _, err := e.c.Client.CoreV1().Pods("default").Patch(e.ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
		e.t.Fatal(err)
	}
}

// holdOf is pod name's preemption hold, as the extender wrote it.
func (e *env) holdOf(name string) (preempt.HoldRecord, bool) {
	e.t.Helper()
	p, err := e.c.Client.CoreV1().Pods("default").Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	raw, ok := p.Annotations[contract.DefaultPreemptionKey]
	if !ok {
		return preempt.HoldRecord{}, false
	}
	var rec preempt.HoldRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		e.t.Fatalf("hold on %s: %v", name, err)
	}
	return rec, true
}

// stillPending fails the test if any of names is bound or any of keep was evicted, after
// waiting long enough for kube-scheduler to have tried (its backoff and the extender's answer).
func (e *env) stillPending(wait time.Duration, pending []string, keep []string) {
	e.t.Helper()
	time.Sleep(wait)
	for _, n := range pending {
		p, err := e.c.Client.CoreV1().Pods("default").Get(e.ctx, n, metav1.GetOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			e.t.Errorf("pod %s was bound to %s", n, p.Spec.NodeName)
		}
	}
	if g := e.gone(keep...); len(g) > 0 {
		e.t.Errorf("pods %v were evicted", g)
	}
}

// reportPreemption logs the victims and GiB evicted per GiB needed.
func (e *env) reportPreemption(need int64, victims map[string]int64) {
	e.t.Helper()
	var evicted int64
	names := make([]string, 0, len(victims))
	for n, u := range victims {
		evicted += u
		names = append(names, n)
	}
	slices.Sort(names)
	e.t.Logf("preemption: %d victims %v, %d GiB evicted for %d GiB needed (%.2f GiB per GiB)",
		len(victims), names, evicted, need, float64(evicted)/float64(need))
}

// waitEvent waits for an event of reason on pod name whose message contains sub.
func (e *env) waitEvent(name, reason, sub string) string {
	e.t.Helper()
	var msg string
	if err := poll(e.ctx, time.Minute, func() (bool, error) {
		list, err := e.c.Client.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		if err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.Reason == reason && strings.Contains(ev.Message, sub) {
				msg = ev.Message
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		e.t.Fatalf("no %s event containing %q on %s; events:\n%s", reason, sub, name, e.events(name))
	}
	return msg
}

// TestPreemptFragmentedNode: one node of two 16 GiB cards, a 10 GiB low-priority pod on each
// (12 GiB free on the node, 6 per card). A high-priority 8 GiB pod fits no card; kube-scheduler's
// own preemption finds no victim (the node total fits). The extender evicts one of the two, holds
// the card, and the pod binds there once the victim is gone.
func TestPreemptFragmentedNode(t *testing.T) {
	cards := map[string][]contract.GPU{"gpu-0": framework.Cards("gpu-0", "Tesla T4", 16, 2)}
	e := newPreemptEnv(t, cards)
	e.prioPod("low-a", 10, lowPriority)
	e.prioPod("low-b", 10, lowPriority)
	e.waitBound("low-a", time.Minute)
	e.waitBound("low-b", time.Minute)
	cardA := e.cardOf("low-a")
	e.prioPod("high", 8, highPriority)
	e.waitBound("high", 2*time.Minute)
	victims := e.gone("low-a", "low-b")
	if len(victims) != 1 {
		t.Fatalf("victims %v, want exactly one of low-a, low-b", victims)
	}
	wantCard := cardA
	if victims[0] == "low-b" {
		wantCard = 1 - cardA
	}
	if got := e.cardOf("high"); got != wantCard {
		t.Errorf("high on GPU %d, want GPU %d, the card its victim %s freed", got, wantCard, victims[0])
	}
	msg := e.waitEvent("high", preempt.ReasonPreempting, "default/"+victims[0])
	t.Logf("event on high: %s", msg)
	e.reportPreemption(8, map[string]int64{victims[0]: 10})
	e.checkConsistent(cards)
}

// TestPreemptFullNode: one 16 GiB card full with a 10 GiB and a 6 GiB low-priority pod. The
// node total does not fit an 8 GiB high-priority pod: kube-scheduler's preemption proposes the
// node and calls the extender's preempt verb, which evicts only the 10 GiB pod (one victim; the 6
// GiB one alone would not do).
func TestPreemptFullNode(t *testing.T) {
	cards := map[string][]contract.GPU{"gpu-0": framework.Cards("gpu-0", "Tesla T4", 16, 1)}
	e := newPreemptEnv(t, cards)
	e.prioPod("low-10", 10, lowPriority)
	e.prioPod("low-6", 6, lowPriority)
	e.waitBound("low-10", time.Minute)
	e.waitBound("low-6", time.Minute)
	e.prioPod("high", 8, highPriority)
	e.waitBound("high", 2*time.Minute)
	if got := e.gone("low-10", "low-6"); !slices.Equal(got, []string{"low-10"}) {
		t.Errorf("victims %v, want [low-10]", got)
	}
	e.reportPreemption(8, map[string]int64{"low-10": 10})
	e.checkConsistent(cards)
}

// TestPreemptCheaperNode: two nodes of one 16 GiB card; on gpu-0 two 6 GiB low pods and a
// 4 GiB one fill it, on gpu-1 one 12 GiB low pod and a 4 GiB one. A 10 GiB high pod needs two
// victims on gpu-0 and one on gpu-1: gpu-1 wins.
func TestPreemptCheaperNode(t *testing.T) {
	cards := map[string][]contract.GPU{"gpu-0": framework.Cards("gpu-0", "Tesla T4", 16, 1), "gpu-1": framework.Cards("gpu-1", "Tesla T4", 16, 1)}
	e := newPreemptEnv(t, cards)
	pin := func(node string) func(*v1.Pod) {
		return func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node} }
	}
	e.prioPod("a-6", 6, lowPriority, pin("gpu-0"))
	e.prioPod("b-6", 6, lowPriority, pin("gpu-0"))
	e.prioPod("c-4", 4, lowPriority, pin("gpu-0"))
	e.prioPod("d-12", 12, lowPriority, pin("gpu-1"))
	e.prioPod("e-4", 4, lowPriority, pin("gpu-1"))
	for _, n := range []string{"a-6", "b-6", "c-4", "d-12", "e-4"} {
		e.waitBound(n, time.Minute)
	}
	e.prioPod("high", 10, highPriority)
	bound := e.waitBound("high", 2*time.Minute)
	if bound.Spec.NodeName != "gpu-1" {
		t.Errorf("high bound to %s, want gpu-1 (one victim instead of two)", bound.Spec.NodeName)
	}
	if got := e.gone("a-6", "b-6", "c-4", "d-12", "e-4"); !slices.Equal(got, []string{"d-12"}) {
		t.Errorf("victims %v, want [d-12]", got)
	}
	e.reportPreemption(10, map[string]int64{"d-12": 12})
	e.checkConsistent(cards)
}

// TestPreemptRefused: on nodes of two 16 GiB cards with a 10 GiB pod on each (the node total
// fits an 8 GiB pod, no card does, so kube-scheduler sends the pod to the extender's filter), a
// pod evicts nothing when it may not preempt (preemptionPolicy Never), when the pods on the cards
// have its own priority, or when a PodDisruptionBudget (minAvailable 2 of 2) protects every pod whose eviction would
// free a card; each says why in a GPUPreemptionFailed event and stays pending.
func TestPreemptRefused(t *testing.T) {
	cards := map[string][]contract.GPU{
		"gpu-never": framework.Cards("gpu-never", "Tesla T4", 16, 2),
		"gpu-equal": framework.Cards("gpu-equal", "Tesla T4", 16, 2),
		"gpu-pdb":   framework.Cards("gpu-pdb", "Tesla T4", 16, 2),
	}
	e := newPreemptEnv(t, cards)
	pin := func(node string) func(*v1.Pod) {
		return func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": node} }
	}
	both := intstr.FromInt32(2) // bare pods: minAvailable (maxUnavailable needs their controller)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "protect", Namespace: "default"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &both, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "protected"}}}}
	if _, err := e.c.Client.PolicyV1().PodDisruptionBudgets("default").Create(e.ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var keep []string
	for _, n := range []string{"a", "b"} {
		e.prioPod("low-never-"+n, 10, lowPriority, pin("gpu-never"))
		e.prioPod("mid-equal-"+n, 10, midPriority, pin("gpu-equal"))
		e.prioPod("low-pdb-"+n, 10, lowPriority, pin("gpu-pdb"), labelled("app", "protected"))
		keep = append(keep, "low-never-"+n, "mid-equal-"+n, "low-pdb-"+n)
	}
	for _, n := range keep {
		e.waitBound(n, time.Minute)
	}
	// The Eviction API ignores budgets for pods not yet running: wait for kwok to run them and
	// for the disruption controller to count them.
	budget := &policyv1.PodDisruptionBudget{}
	if err := poll(e.ctx, time.Minute, func() (bool, error) {
		for _, n := range []string{"low-pdb-a", "low-pdb-b"} {
			p, err := e.c.Client.CoreV1().Pods("default").Get(e.ctx, n, metav1.GetOptions{})
			if err != nil || p.Status.Phase != v1.PodRunning {
				return false, err
			}
		}
		b, err := e.c.Client.PolicyV1().PodDisruptionBudgets("default").Get(e.ctx, "protect", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		budget = b
		return b.Status.ObservedGeneration >= b.Generation && b.Status.CurrentHealthy == 2 && b.Status.DisruptionsAllowed == 0, nil
	}); err != nil {
		t.Fatalf("the protected pods never ran under their budget: %v (status %+v)", err, budget.Status)
	}
	e.prioPod("high-never", 8, highPriority, pin("gpu-never"), neverPreempts)
	e.prioPod("mid-equal-c", 8, midPriority, pin("gpu-equal"))
	e.prioPod("high-pdb", 8, highPriority, pin("gpu-pdb"))
	t.Logf("never: %s", e.waitEvent("high-never", preempt.ReasonPreemptionFailed, "preemptionPolicy is Never"))
	t.Logf("equal: %s", e.waitEvent("mid-equal-c", preempt.ReasonPreemptionFailed, "no pod of lower priority"))
	t.Logf("budget: %s", e.waitEvent("high-pdb", preempt.ReasonPreemptionFailed, "disruption budget"))
	e.stillPending(5*time.Second, []string{"high-never", "mid-equal-c", "high-pdb"}, keep)
	e.reportPreemption(8, nil)
	e.checkConsistent(cards)
}

// TestPreemptHoldsFreedMemory: the victim stays terminating (a finalizer); meanwhile the
// preemptor is not bound (the victim's memory is not free yet) and a low-priority pod asking the
// freed memory arrives (10 GiB: it would fit the emptied card, not beside the 8 GiB held). When
// the victim goes, the preemptor gets the card and the low pod does not: it stays pending.
func TestPreemptHoldsFreedMemory(t *testing.T) {
	cards := map[string][]contract.GPU{"gpu-0": framework.Cards("gpu-0", "Tesla T4", 16, 1)}
	e := newPreemptEnv(t, cards)
	e.prioPod("victim", 12, lowPriority, withFinalizer)
	e.waitBound("victim", time.Minute)
	e.prioPod("high", 8, highPriority)
	if err := poll(e.ctx, time.Minute, func() (bool, error) { return len(e.gone("victim")) == 1, nil }); err != nil {
		t.Fatalf("the victim was never evicted; events of high:\n%s", e.events("high"))
	}
	rec, ok := e.holdOf("high")
	if !ok || rec.Node != "gpu-0" || rec.Units != 8 {
		t.Fatalf("hold on high %+v (%v), want 8 units on gpu-0", rec, ok)
	}
	e.prioPod("low-late", 10, lowPriority) // 16 - 8 held: 8 left for others, not 10
	e.stillPending(3*time.Second, []string{"high", "low-late"}, nil)
	e.release("victim")
	e.waitBound("high", 2*time.Minute)
	e.stillPending(5*time.Second, []string{"low-late"}, []string{"high"})
	e.reportPreemption(8, map[string]int64{"victim": 12})
	e.checkConsistent(cards)
}

// TestPreemptLeaderKilled: two extender replicas; the leader evicts the victim (kept
// terminating by a finalizer) and is killed. The new leader rebuilds the hold from the
// preemptor's annotation: a low-priority pod that arrives meanwhile does not get the freed
// memory, the preemptor does.
func TestPreemptLeaderKilled(t *testing.T) {
	e := newEnvWithoutScheduler(t, "--leader-elect-identity=ext-a")
	b := e.twoReplicas()
	e.priorityClasses()
	cards := map[string][]contract.GPU{"gpu-0": framework.Cards("gpu-0", "Tesla T4", 16, 1)}
	e.nodes(cards)
	e.prioPod("victim", 12, lowPriority, withFinalizer)
	e.waitBound("victim", time.Minute)
	e.prioPod("high", 8, highPriority)
	if err := poll(e.ctx, time.Minute, func() (bool, error) { return len(e.gone("victim")) == 1, nil }); err != nil {
		t.Fatalf("the victim was never evicted; events of high:\n%s", e.events("high"))
	}
	e.ext.Proc.Kill()
	killed := time.Now()
	if err := poll(e.ctx, time.Minute, func() (bool, error) { return b.Leading(e.ctx) }); err != nil {
		t.Fatalf("the follower never took over: %v", err)
	}
	t.Logf("the follower led %.1f s after the kill", time.Since(killed).Seconds())
	e.prioPod("low-late", 10, lowPriority) // 16 - 8 held: 8 left for others, not 10
	e.release("victim")
	e.ext = b
	e.waitBound("high", 2*time.Minute)
	e.stillPending(5*time.Second, []string{"low-late"}, []string{"high"})
	e.reportPreemption(8, map[string]int64{"victim": 12})
	e.checkConsistent(cards)
}

// TestPreemptBurst: 16 high-priority 8 GiB pods created at once onto six nodes of two 16 GiB
// cards, each card full with one 16 GiB low-priority pod. Each eviction frees a card for two of
// them, so 8 victims are the minimum (of 12). Planned side by side, the preemptors used to pick
// the same card and victims and stack their holds on it, then wait for the holds to run out
// (grace period + 1 minute): all 16 bound after 390 s. Serialised, each plans around the holds
// before it: all bind within the victims' grace period plus 15 s, 8 victims, 8 preemptions
// counted, no card over capacity, and no bound pod keeps its hold annotation.
func TestPreemptBurst(t *testing.T) {
	const nodes, highs = 6, 16
	cards := map[string][]contract.GPU{}
	for i := range nodes {
		name := fmt.Sprintf("gpu-%d", i)
		cards[name] = framework.Cards(name, "Tesla T4", 16, 2)
	}
	e := newPreemptEnv(t, cards)
	var lows []string
	for i := range 2 * nodes {
		lows = append(lows, fmt.Sprintf("low-%02d", i))
		e.prioPod(lows[i], 16, lowPriority)
	}
	for _, n := range lows {
		e.waitBound(n, time.Minute)
	}
	wantVictims := highs * 8 / 16 // each freed 16 GiB card takes two 8 GiB pods
	names := make([]string, highs)
	errs := make(chan error, highs)
	start := time.Now()
	for i := range highs {
		names[i] = fmt.Sprintf("high-%02d", i)
		p := e.gpuPod(names[i], 8)
		p.Spec.PriorityClassName = highPriority
		go func() {
			_, err := e.c.Client.CoreV1().Pods("default").Create(e.ctx, p, metav1.CreateOptions{})
			errs <- err
		}()
	}
	for range highs {
		if err := <-errs; err != nil {
			t.Fatalf("create: %v", err)
		}
	}
	limit := time.Duration(v1.DefaultTerminationGracePeriodSeconds)*time.Second + 15*time.Second
	bound := 0
	if err := poll(e.ctx, limit-time.Since(start), func() (bool, error) {
		bound = 0
		for _, n := range names {
			p, err := e.c.Client.CoreV1().Pods("default").Get(e.ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if p.Spec.NodeName != "" {
				bound++
			}
		}
		return bound == highs, nil
	}); err != nil {
		t.Fatalf("%d of %d preemptors bound within %v; events of %s:\n%s", bound, highs, limit, names[highs-1], e.events(names[highs-1]))
	}
	t.Logf("all %d preemptors bound %.1f s after their creation (limit %v)", highs, time.Since(start).Seconds(), limit)
	victims := e.gone(lows...)
	evicted := map[string]int64{}
	for _, v := range victims {
		evicted[v] = 16
	}
	e.reportPreemption(highs*8, evicted)
	if len(victims) != wantVictims {
		t.Errorf("%d victims %v, want the minimum, %d", len(victims), victims, wantVictims)
	}
	e.checkPreemptionMetrics(wantVictims)
	e.checkHoldsRemoved(names...)
	e.checkConsistent(cards)
	inv, err := e.c.CheckInvariants(e.ctx, "default", e.ext)
	if err != nil {
		t.Fatal(err)
	}
	if !inv.OK() {
		t.Errorf("invariants: %s", inv)
	}
}

// checkPreemptionMetrics asserts that the extender counted want preemptions, each with one victim.
func (e *env) checkPreemptionMetrics(want int) {
	e.t.Helper()
	m, err := e.ext.Metrics(e.ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	preemptions, victims := m["gpushare_preemptions_total"], m["gpushare_preemption_victims_total"]
	e.t.Logf("gpushare_preemptions_total %g, gpushare_preemption_victims_total %g, gpushare_preempt_total %g, gpushare_preemptions_failed_total %g",
		preemptions, victims, m["gpushare_preempt_total"], m["gpushare_preemptions_failed_total"])
	if preemptions != float64(want) || victims != float64(want) {
		e.t.Errorf("preemptions counted %g, victims %g; want %d and %d", preemptions, victims, want, want)
	}
}

// checkHoldsRemoved asserts that none of the pods named, all bound, keeps a preemption hold
// annotation (the bind removes it, by a patch right after the Binding).
func (e *env) checkHoldsRemoved(names ...string) {
	e.t.Helper()
	var held []string
	if err := poll(e.ctx, 10*time.Second, func() (bool, error) {
		held = nil
		for _, n := range names {
			if _, ok := e.holdOf(n); ok {
				held = append(held, n)
			}
		}
		return len(held) == 0, nil
	}); err != nil {
		e.t.Errorf("bound pods still carry their hold: %v", held)
	}
}

// TestPreemptLeastPrivilege is issue 38, point 4. With the extender's RBAC and admission
// policies installed (config/extender/rbac.yaml, config/admission/extender-*.yaml) and the
// extender running as its service account (leader election on: its writes carry the fence
// token), (i) a GPU preemption still works end to end: the victim, kept terminating by a
// finalizer, is marked gpushare.io/preempted-by "default/high/1000" and deleted, and the
// preemptor binds on its card; (ii) the account is refused, by gpushare-extender-pods, deleting
// a pod that asks no gpu-mem, a gpu-mem pod without the mark, a pod whose mark names a
// priority not above its own, and a real eviction of a pod it could delete, while a dry-run
// eviction and a dry-run delete of that pod are allowed. No pod it was refused is gone, and
// the invariants hold.
func TestPreemptLeastPrivilege(t *testing.T) {
	e := newEnvWithoutScheduler(t)
	e.ext.Proc.Stop(10 * time.Second) // releases the Lease: the extender restarts as its account
	e.installFence()
	ext, err := e.c.StartExtenderAs(e.ctx, "extender-a", s.extender, 0, "--kubeconfig="+e.extenderKubeconfig(""), "--leader-elect-identity=ext-a")
	if err != nil {
		t.Fatal(err)
	}
	e.ext = ext
	if err := e.c.StartScheduler(ext.Host()); err != nil {
		t.Fatal(err)
	}
	e.priorityClasses()
	cards := map[string][]contract.GPU{"gpu-0": framework.Cards("gpu-0", "Tesla T4", 16, 1)}
	e.nodes(cards)

	e.prioPod("victim", 12, lowPriority, withFinalizer)
	e.waitBound("victim", time.Minute)
	e.prioPod("high", 8, highPriority)
	if err := poll(e.ctx, time.Minute, func() (bool, error) { return len(e.gone("victim")) == 1, nil }); err != nil {
		t.Fatalf("the victim was never deleted; events of high:\n%s", e.events("high"))
	}
	victim, err := e.c.Client.CoreV1().Pods("default").Get(e.ctx, "victim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := victim.Annotations[contract.AnnotationPreemptedBy], "default/high/1000"; got != want {
		t.Errorf("the victim's %s = %q, want %q", contract.AnnotationPreemptedBy, got, want)
	}
	e.release("victim")
	e.waitBound("high", 2*time.Minute)
	e.checkRemovalsRefused()
	e.reportPreemption(8, map[string]int64{"victim": 12})
	e.checkConsistent(cards)
	inv, err := e.c.CheckInvariants(e.ctx, "default", e.ext)
	if err != nil {
		t.Fatal(err)
	}
	if !inv.OK() {
		t.Errorf("invariants: %s", inv)
	}
}

// checkRemovalsRefused creates, as admin, pending pods no scheduler takes, and shows the
// extender's account refused by gpushare-extender-pods every removal GPU preemption does not
// need, allowed the dry runs it does, and the pods still there.
func (e *env) checkRemovalsRefused() {
	e.t.Helper()
	client, err := clientFor(e.extenderKubeconfig(""))
	if err != nil {
		e.t.Fatal(err)
	}
	pending := func(p *v1.Pod) { p.Spec.SchedulerName = "no-such-scheduler" } // off the cards
	mark := func(value string) func(*v1.Pod) {
		return func(p *v1.Pod) { metav1.SetMetaDataAnnotation(&p.ObjectMeta, contract.AnnotationPreemptedBy, value) }
	}
	noGPU := func(p *v1.Pod) { p.Spec.Containers[0].Resources = v1.ResourceRequirements{} }
	e.prioPod("no-gpu-mem", 0, lowPriority, pending, noGPU, mark("default/high/1000"))
	e.prioPod("unmarked", 4, lowPriority, pending)
	e.prioPod("marked-own-priority", 4, lowPriority, pending, mark("default/high/10"))
	e.prioPod("marked", 4, lowPriority, pending, mark("default/high/1000"))
	del := func(name string, dryRun bool) func() error {
		opts := metav1.DeleteOptions{}
		if dryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		return func() error { return client.CoreV1().Pods("default").Delete(e.ctx, name, opts) }
	}
	evict := func(name string) func() error {
		return func() error {
			return client.PolicyV1().Evictions("default").Evict(e.ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}})
		}
	}
	bodyDryRun := func(name string) func() error { // the dry run in the body only: admission does not see it
		return func() error {
			return client.PolicyV1().Evictions("default").Evict(e.ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
				DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}})
		}
	}
	for _, tc := range []struct {
		name string
		do   func() error
		want string // "": allowed
	}{
		{"delete a pod without gpu-mem", del("no-gpu-mem", false), "asks none"},
		{"delete a gpu-mem pod without the mark", del("unmarked", false), "it carries none"},
		{"delete a pod marked with its own priority", del("marked-own-priority", false), `above its own (10); it carries "default/high/10"`},
		{"evict a marked gpu-mem pod for real", evict("marked"), "only in a dry run"},
		{"evict with the dry run in the Eviction's body only", bodyDryRun("marked"), "only in a dry run"},
		{"evict a marked gpu-mem pod in a dry run", func() error { return dryRunEviction(e.ctx, client, "default", "marked") }, ""},
		{"delete a marked gpu-mem pod in a dry run", del("marked", true), ""},
	} {
		err := tc.do()
		var status apierrors.APIStatus
		switch {
		case tc.want == "" && err != nil:
			e.t.Errorf("%s: refused, want allowed: %v", tc.name, err)
		case tc.want == "":
			e.t.Logf("%s: allowed", tc.name)
		case !apierrors.IsForbidden(err) || !errors.As(err, &status) ||
			!strings.Contains(status.Status().Message, "ValidatingAdmissionPolicy 'gpushare-extender-pods'") || !strings.Contains(status.Status().Message, tc.want):
			e.t.Errorf("%s: %v, want refused by gpushare-extender-pods saying %q", tc.name, err, tc.want)
		default:
			e.t.Logf("%s: refused: %v", tc.name, err)
		}
	}
	if g := e.gone("no-gpu-mem", "unmarked", "marked-own-priority", "marked"); len(g) > 0 {
		e.t.Errorf("pods %v are gone: a refused removal went through", g)
	}
}

// dryRunEviction evicts pod namespace/name in a dry run as the extender does: ?dryRun=All on the
// request (what admission sees as request.dryRun) and in the Eviction's deleteOptions.
// client-go's Evict cannot send the query parameter.
func dryRunEviction(ctx context.Context, client kubernetes.Interface, namespace, name string) error {
	ev := &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}}}
	return client.PolicyV1().RESTClient().Post().AbsPath("/api/v1").Namespace(namespace).Resource("pods").Name(name).
		SubResource("eviction").Param("dryRun", metav1.DryRunAll).Body(ev).Do(ctx).Error()
}
