package scheduler_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/scheduler/preempt"
	servertesting "github.com/gpushare/gpushare/pkg/scheduler/server/testing"
)

// evictions is a fake of what preemption asks the API server, as the extender's admission
// policy lets it: dry-run evictions, which it refuses for the pods a PodDisruptionBudget
// protects (429); no real eviction (403); and pod deletes of pods marked preempted
// (contract.AnnotationPreemptedBy; 403 without the mark), which mark the pod terminating (its
// grace period running).
type evictions struct {
	mu        sync.Mutex
	protected map[string]bool
	dryRuns   []string
	evicted   []string // the pods deleted, in order
}

// install puts the fake in front of client's pod creates (pods/eviction) and deletes.
func (ev *evictions) install(client *fake.Clientset) {
	client.PrependReactor("create", "pods", ev.reactor(client))
	client.PrependReactor("delete", "pods", ev.deleteReactor(client))
}

func (ev *evictions) reactor(client *fake.Clientset) k8stesting.ReactionFunc {
	return func(action k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := action.(k8stesting.CreateAction)
		if !ok || action.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		e := ca.GetObject().(*policyv1.Eviction)
		ev.mu.Lock()
		defer ev.mu.Unlock()
		if ev.protected[e.Name] {
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		}
		if e.DeleteOptions == nil || len(e.DeleteOptions.DryRun) == 0 {
			return true, nil, apierrors.NewForbidden(v1.Resource("pods"), e.Name, errors.New("the gpushare extender may evict pods only in a dry run"))
		}
		ev.dryRuns = append(ev.dryRuns, e.Name)
		if _, err := client.Tracker().Get(v1.SchemeGroupVersion.WithResource("pods"), e.Namespace, e.Name); err != nil {
			return true, nil, err
		}
		return true, nil, nil
	}
}

func (ev *evictions) deleteReactor(client *fake.Clientset) k8stesting.ReactionFunc {
	return func(action k8stesting.Action) (bool, runtime.Object, error) {
		da := action.(k8stesting.DeleteAction)
		gvr := v1.SchemeGroupVersion.WithResource("pods")
		obj, err := client.Tracker().Get(gvr, da.GetNamespace(), da.GetName())
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*v1.Pod).DeepCopy()
		if pod.Annotations[contract.AnnotationPreemptedBy] == "" {
			return true, nil, apierrors.NewForbidden(gvr.GroupResource(), pod.Name, errors.New("not marked "+contract.AnnotationPreemptedBy))
		}
		ev.mu.Lock()
		defer ev.mu.Unlock()
		ev.evicted = append(ev.evicted, pod.Name)
		now := metav1.Now()
		pod.DeletionTimestamp = &now
		return true, nil, client.Tracker().Update(gvr, pod, pod.Namespace)
	}
}

func (ev *evictions) done() []string {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return slices.Clone(ev.evicted)
}

// prio sets a pod's priority (and optionally preemption policy Never).
func prio(p *v1.Pod, priority int32, never bool) *v1.Pod {
	p.Spec.Priority = &priority
	if never {
		pol := v1.PreemptNever
		p.Spec.PreemptionPolicy = &pol
	}
	return p
}

// preemptEnv is a node n1 of two 16 GiB cards: a (6) and b (4) on card 0, c (10) on card 1,
// all of priority 0, and the pending pods given.
func preemptEnv(t *testing.T, ev *evictions, pending ...*v1.Pod) *env {
	t.Helper()
	nodes := []*v1.Node{st.MakeNode("n1").GPUs(16, 16).Obj()}
	pods := []*v1.Pod{
		prio(st.MakePod().Name("a").GPUMem(6).Node("n1").Placement(`{"0":{"0":6}}`).Obj(), 0, false),
		prio(st.MakePod().Name("b").GPUMem(4).Node("n1").Placement(`{"0":{"0":4}}`).Obj(), 0, false),
		prio(st.MakePod().Name("c").GPUMem(10).Node("n1").Placement(`{"0":{"1":10}}`).Obj(), 0, false),
	}
	e := newEnv(t, "binpack", nodes, append(pods, pending...)...)
	ev.install(e.client)
	return e
}

func filterOn(e *env, pod *v1.Pod, nodes ...string) *extenderv1.ExtenderFilterResult {
	return e.ext.Filter(e.ctx, &extenderv1.ExtenderArgs{Pod: pod, NodeNames: &nodes})
}

// holdOn reads the preemption annotation of pod name from the API.
func holdOn(t *testing.T, e *env, name string) (preempt.HoldRecord, bool) {
	t.Helper()
	p, err := e.client.CoreV1().Pods("default").Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	raw, ok := p.Annotations[contract.DefaultPreemptionKey]
	if !ok {
		return preempt.HoldRecord{}, false
	}
	var rec preempt.HoldRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		t.Fatalf("hold annotation %q: %v", raw, err)
	}
	return rec, true
}

// TestPreemptFragmentedNode is issue 28's fragmented node: 12 GiB free on n1, 6 on each card;
// an 8 GiB pod of higher priority fits no card. Its filter preempts the one cheapest victim (b,
// 4 GiB on card 0: one victim, and less memory than c), writes the hold, and evicts b. While b
// terminates the preemptor still does not fit (b's memory is not free yet) and preempts nothing
// more; a lower-priority 8 GiB pod arriving meanwhile does not get the held memory once b is
// gone; the preemptor then fits and binds on card 0, which ends the hold.
func TestPreemptFragmentedNode(t *testing.T) {
	ev := &evictions{}
	p := prio(st.MakePod().Name("p").GPUMem(8).Obj(), 100, false)
	low := prio(st.MakePod().Name("low").GPUMem(8).Obj(), 0, false)
	e := preemptEnv(t, ev, p, low)

	if got := filterOn(e, p, "n1"); len(*got.NodeNames) != 0 {
		t.Fatalf("p fits %v before any preemption", *got.NodeNames)
	}
	servertesting.WaitFor(t, "the eviction of b", func() bool { return len(ev.done()) == 1 })
	if got := ev.done(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("evicted %v, want [b]", got)
	}
	rec, ok := holdOn(t, e, "p")
	if !ok || rec.Node != "n1" || rec.GPU != 0 || rec.Units != 8 || !slices.Equal(rec.Victims, []string{"default/b"}) {
		t.Fatalf("hold on p = %+v (%v), want n1 GPU 0, 8 units, victim default/b", rec, ok)
	}

	// b terminating: its memory is still held.
	b, err := e.client.CoreV1().Pods("default").Get(e.ctx, "b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.cache.SetPod(b)
	// Filter answers an error, which kube-scheduler retries after its backoff: an
	// unschedulable pod would wait for a cluster event, and the victim's deletion may reach
	// kube-scheduler before the extender's cache.
	if got := filterOn(e, p, "n1"); (got.NodeNames != nil && len(*got.NodeNames) != 0) || !strings.Contains(got.Error, "GPU 0 of node n1 is held for this pod") {
		t.Errorf("filter of p while its victim still terminates = %+v, want the error that the card is held for it", got)
	}
	time.Sleep(50 * time.Millisecond) // a second preemption would have started by now
	if got := ev.done(); len(got) != 1 {
		t.Errorf("evicted %v: the held preemptor preempted again", got)
	}

	// b gone: card 0 has 10 GiB free, 8 of them held for p.
	e.cache.RemovePod(b)
	if got := filterOn(e, low, "n1"); len(*got.NodeNames) != 0 {
		t.Errorf("a lower-priority pod took the memory held for the preemptor")
	}
	if got := filterOn(e, p, "n1"); !slices.Equal(*got.NodeNames, []string{"n1"}) {
		t.Fatalf("p does not fit once its victim is gone: %v", got.FailedNodes)
	}
	if err := e.ext.Bind(e.ctx, bindArgs("p", "n1")); err != nil {
		t.Fatal(err)
	}
	bound, ok := e.cache.Pod(p.UID)
	if !ok || bound.Allocation.PerGPU()[0] != 8 {
		t.Fatalf("p placed %+v, want 8 units on card 0", bound.Allocation)
	}
	// The hold ended with the bind: the rest of card 0 (2 GiB) and card 1 serve anyone.
	small := prio(st.MakePod().Name("small").GPUMem(2).Obj(), 0, false)
	if got := filterOn(e, small, "n1"); !slices.Equal(*got.NodeNames, []string{"n1"}) {
		t.Errorf("a 2 GiB pod does not fit after the preemptor bound: %v", got.FailedNodes)
	}
}

// TestPreemptRefusals: no eviction when the pod may not preempt or no victim is allowed, with
// the reason; a PodDisruptionBudget on the cheapest victim moves the preemption to the next
// cheapest.
func TestPreemptRefusals(t *testing.T) {
	tests := []struct {
		name        string
		pod         *v1.Pod
		protected   []string
		wantEvicted []string
	}{
		{name: "preemptionPolicy Never", pod: prio(st.MakePod().Name("p").GPUMem(8).Obj(), 100, true)},
		{name: "equal priority", pod: prio(st.MakePod().Name("p").GPUMem(8).Obj(), 0, false)},
		{name: "lower priority", pod: prio(st.MakePod().Name("p").GPUMem(8).Obj(), -1, false)},
		{name: "two cards", pod: prio(st.MakePod().Name("p").GPUMem(8).Annotation(contract.DefaultGPUsPerContainer, "2").Obj(), 100, false)},
		{name: "budget on b: a instead (6 GiB, less than c)", pod: prio(st.MakePod().Name("p").GPUMem(8).Obj(), 100, false), protected: []string{"b"}, wantEvicted: []string{"a"}},
		{name: "budgets on a and b: c on the other card", pod: prio(st.MakePod().Name("p").GPUMem(8).Obj(), 100, false), protected: []string{"a", "b"}, wantEvicted: []string{"c"}},
		{name: "budget on every useful victim", pod: prio(st.MakePod().Name("p").GPUMem(8).Obj(), 100, false), protected: []string{"a", "b", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := &evictions{protected: map[string]bool{}}
			for _, n := range tt.protected {
				ev.protected[n] = true
			}
			e := preemptEnv(t, ev, tt.pod)
			res := e.ext.Preempt(e.ctx, &extenderv1.ExtenderPreemptionArgs{Pod: tt.pod, NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
				"n1": {Pods: []*extenderv1.MetaPod{{UID: "uid-a"}}},
			}})
			if len(res.NodeNameToMetaVictims) != 0 {
				t.Errorf("Preempt() left kube-scheduler victims %v, want none (the extender evicts GPU pods itself)", res.NodeNameToMetaVictims)
			}
			if got := ev.done(); !slices.Equal(got, tt.wantEvicted) {
				t.Errorf("evicted %v, want %v", got, tt.wantEvicted)
			}
			_, held := holdOn(t, e, "p")
			if held != (len(tt.wantEvicted) > 0) {
				t.Errorf("hold written = %v, want %v", held, len(tt.wantEvicted) > 0)
			}
			if m := counter(t, e.ext.Metrics(), "gpushare_preemptions_failed_total"); (m > 0) == (len(tt.wantEvicted) > 0) {
				t.Errorf("gpushare_preemptions_failed_total = %g with evictions %v", m, tt.wantEvicted)
			}
		})
	}
}

// TestPreemptVerbKeepsOtherVictims: on the node the extender chose, the victims kube-scheduler
// proposed that hold no gpu-mem (needed for CPU or memory) are passed back for it to delete;
// the GPU victims are the extender's to evict.
func TestPreemptVerbKeepsOtherVictims(t *testing.T) {
	ev := &evictions{}
	p := prio(st.MakePod().Name("p").GPUMem(8).Obj(), 100, false)
	e := preemptEnv(t, ev, p)
	res := e.ext.Preempt(e.ctx, &extenderv1.ExtenderPreemptionArgs{Pod: p, NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
		"n1": {Pods: []*extenderv1.MetaPod{{UID: "uid-a"}, {UID: "uid-cpu-only"}}},
	}})
	want := map[string]*extenderv1.MetaVictims{"n1": {Pods: []*extenderv1.MetaPod{{UID: "uid-cpu-only"}}}}
	if got := res.NodeNameToMetaVictims; len(got) != 1 || len(got["n1"].Pods) != 1 || got["n1"].Pods[0].UID != "uid-cpu-only" {
		t.Errorf("Preempt() = %v, want %v", got, want)
	}
	if got := ev.done(); !slices.Equal(got, []string{"b"}) {
		t.Errorf("evicted %v, want [b]", got)
	}
}
