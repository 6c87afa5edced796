package scheduler_test

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/scheduler"
	"github.com/gpushare/gpushare/pkg/scheduler/preempt"
	servertesting "github.com/gpushare/gpushare/pkg/scheduler/server/testing"
)

// low is a bound pod of priority 0 holding units on card of node n1.
func low(name string, card int, units int64) *v1.Pod {
	return prio(st.MakePod().Name(name).GPUMem(units).Node("n1").Placement(fmt.Sprintf(`{"0":{"%d":%d}}`, card, units)).Obj(), 0, false)
}

// high is a pending 8 GiB pod of priority 100.
func high(name string) *v1.Pod { return prio(st.MakePod().Name(name).GPUMem(8).Obj(), 100, false) }

// cardsEnv is node n1 with cards of the sizes given, the bound pods and the pending ones, and the
// fake Eviction API ev; the extender gets opts.
func cardsEnv(t *testing.T, ev *evictions, cards []int64, opts []scheduler.Option, pods ...*v1.Pod) *env {
	t.Helper()
	e := newEnvOpts(t, newPolicy(t, "binpack"), opts, []*v1.Node{st.MakeNode("n1").GPUs(cards...).Obj()}, pods...)
	ev.install(e.client)
	return e
}

// preemptVerb is kube-scheduler's preempt call for pod with victims proposed on n1.
func preemptVerb(e *env, pod *v1.Pod, victims ...string) {
	mv := &extenderv1.MetaVictims{}
	for _, v := range victims {
		mv.Pods = append(mv.Pods, &extenderv1.MetaPod{UID: "uid-" + v})
	}
	e.ext.Preempt(e.ctx, &extenderv1.ExtenderPreemptionArgs{Pod: pod, NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{"n1": mv}})
}

// holdsOn reads the holds of the pods named from the API: pod → hold.
func holdsOn(t *testing.T, e *env, names ...string) map[string]preempt.HoldRecord {
	t.Helper()
	out := map[string]preempt.HoldRecord{}
	for _, n := range names {
		if rec, ok := holdOn(t, e, n); ok {
			out[n] = rec
		}
	}
	return out
}

// TestPreemptConcurrentPreemptorsOneCard: three 8 GiB preemptors call the preempt verb at once
// for one 16 GiB card full with two 8 GiB victims. Planning is serialised: the first evicts one
// victim, the second plans around the first's hold (that victim's memory is the first's) and
// evicts the other, the third finds nothing left to free. Each victim is evicted once, two
// holds of 8 on the card, no more than it has. Run with -race; several rounds vary the order.
func TestPreemptConcurrentPreemptorsOneCard(t *testing.T) {
	for round := range 10 {
		t.Run(fmt.Sprintf("round %d", round), func(t *testing.T) {
			ev := &evictions{}
			ps := []*v1.Pod{high("p1"), high("p2"), high("p3")}
			e := cardsEnv(t, ev, []int64{16}, nil, append([]*v1.Pod{low("a", 0, 8), low("b", 0, 8)}, ps...)...)
			start := make(chan struct{})
			var wg sync.WaitGroup
			for _, p := range ps {
				wg.Go(func() { <-start; preemptVerb(e, p, "a", "b") })
			}
			close(start)
			wg.Wait()
			got := ev.done()
			slices.Sort(got)
			if diff := cmp.Diff([]string{"a", "b"}, got); diff != "" {
				t.Errorf("evicted (-want,+got):\n%s", diff)
			}
			holds := holdsOn(t, e, "p1", "p2", "p3")
			var units int64
			var victims []string
			for _, h := range holds {
				if h.Node != "n1" || h.GPU != 0 {
					t.Errorf("hold %+v, want on n1 GPU 0", h)
				}
				units += h.Units
				victims = append(victims, h.Victims...)
			}
			slices.Sort(victims)
			if len(holds) != 2 || units != 16 || !slices.Equal(victims, []string{"default/a", "default/b"}) {
				t.Errorf("holds %+v: want two of 8 units on the 16 GiB card, one victim each", holds)
			}
			m := e.ext.Metrics()
			if p, v := counter(t, m, "gpushare_preemptions_total"), counter(t, m, "gpushare_preemption_victims_total"); p != 2 || v != 2 {
				t.Errorf("preemptions %g, victims %g; want 2 and 2", p, v)
			}
		})
	}
}

// TestPreemptionsCountStartedOnly: gpushare_preemptions_total counts the preemptions that
// evicted a victim, not the calls or the plans. One 16 GiB card full with one 16 GiB victim;
// two 8 GiB preemptors at once: the first evicts it, the second waits for the same memory
// (its hold evicts nothing); a preemptor asking again while held, and one of policy Never,
// start nothing either.
func TestPreemptionsCountStartedOnly(t *testing.T) {
	ev := &evictions{}
	p1, p2, never := high("p1"), high("p2"), prio(st.MakePod().Name("never").GPUMem(8).Obj(), 100, true)
	e := cardsEnv(t, ev, []int64{16}, nil, low("v", 0, 16), p1, p2, never)
	var wg sync.WaitGroup
	for _, p := range []*v1.Pod{p1, p2} {
		wg.Go(func() { preemptVerb(e, p, "v") })
	}
	wg.Wait()
	preemptVerb(e, p1, "v")
	preemptVerb(e, never, "v")
	if got := ev.done(); !slices.Equal(got, []string{"v"}) {
		t.Errorf("evicted %v, want [v]", got)
	}
	if holds := holdsOn(t, e, "p1", "p2"); len(holds) != 2 {
		t.Errorf("holds %+v, want one on each preemptor", holds)
	}
	m := e.ext.Metrics()
	want := map[string]float64{"gpushare_preempt_total": 4, "gpushare_preemptions_total": 1, "gpushare_preemption_victims_total": 1}
	got := map[string]float64{}
	for name := range want {
		got[name] = counter(t, m, name)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("metrics (-want,+got):\n%s", diff)
	}
}

// TestPreemptFitsNowEvictsNothing: memory freed since kube-scheduler looked (here the first
// preemptor's victim, 16 GiB, already gone: 8 of it held for the first) is held for the next
// preemptor without an eviction; the third, with that card fully held, evicts on the other card.
func TestPreemptFitsNowEvictsNothing(t *testing.T) {
	ev := &evictions{}
	e := cardsEnv(t, ev, []int64{16, 16}, nil, low("v", 0, 16), low("w", 1, 16), high("p1"), high("p2"), high("p3"))
	preemptVerb(e, high("p1"), "v", "w")
	if got := ev.done(); !slices.Equal(got, []string{"v"}) {
		t.Fatalf("evicted %v, want [v]", got)
	}
	e.cache.RemovePod(low("v", 0, 16))
	preemptVerb(e, high("p2"), "w")
	if got := ev.done(); !slices.Equal(got, []string{"v"}) {
		t.Errorf("evicted %v after p2, want [v]: 8 GiB of card 0 were free", got)
	}
	if h, ok := holdOn(t, e, "p2"); !ok || h.GPU != 0 || len(h.Victims) != 0 {
		t.Errorf("hold on p2 %+v (%v), want card 0 without victims", h, ok)
	}
	preemptVerb(e, high("p3"), "w")
	if got := ev.done(); !slices.Equal(got, []string{"v", "w"}) {
		t.Errorf("evicted %v after p3, want [v w]", got)
	}
	if m := counter(t, e.ext.Metrics(), "gpushare_preemptions_total"); m != 2 {
		t.Errorf("gpushare_preemptions_total = %g, want 2", m)
	}
}

// TestBindEndsHold: binding a pod removes its hold annotation (a patch after the Binding, which
// cannot remove one) and its hold; a pod without a hold gets no patch.
func TestBindEndsHold(t *testing.T) {
	forged := `{"node":"n1","gpu":0,"units":16,"until":"2026-11-27T12:00:00Z"}`
	tests := []struct {
		name      string
		pod       *v1.Pod
		preempt   bool
		wantPatch bool
	}{
		{name: "preemptor whose hold this extender wrote", pod: high("p"), preempt: true, wantPatch: true},
		{name: "pod carrying a hold of its own writing", pod: prio(st.MakePod().Name("p").GPUMem(8).Annotation(contract.DefaultPreemptionKey, forged).Obj(), 100, false), wantPatch: true},
		{name: "pod without a hold", pod: high("p")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := &evictions{}
			e := cardsEnv(t, ev, []int64{16, 16}, nil, low("a", 0, 6), low("b", 0, 4), low("c", 1, 10), tt.pod)
			if tt.preempt {
				preemptVerb(e, tt.pod, "b")
				if _, ok := holdOn(t, e, "p"); !ok {
					t.Fatal("no hold written")
				}
			}
			e.cache.RemovePod(low("b", 0, 4)) // evicted, or gone: card 0 has 10 GiB free
			e.client.ClearActions()
			if err := e.ext.Bind(e.ctx, bindArgs("p", "n1")); err != nil {
				t.Fatal(err)
			}
			if _, ok := holdOn(t, e, "p"); ok {
				t.Error("the bound pod still carries its hold")
			}
			patches := 0
			for _, a := range e.client.Actions() {
				if pa, ok := a.(k8stesting.PatchAction); ok && a.GetVerb() == "patch" {
					patches++
					if !strings.Contains(string(pa.GetPatch()), `"uid":"uid-p"`) {
						t.Errorf("patch %s does not name the pod's UID", pa.GetPatch())
					}
				}
			}
			if (patches > 0) != tt.wantPatch {
				t.Errorf("%d patches after the bind, want a patch: %v", patches, tt.wantPatch)
			}
		})
	}
}

// TestHoldsAfterRestart: a restarted extender (or a new leader) honours a hold only when it
// verifies under its key: the hold written under the same --hold-key-file is rebuilt and keeps
// its card from a lower-priority pod; one written under another key, under the random key of
// another process, or by the pod's owner is ignored and counted.
func TestHoldsAfterRestart(t *testing.T) {
	key := []byte(strings.Repeat("k", preempt.MinHoldKeyBytes))
	forged := `{"node":"n1","gpu":0,"units":8,"until":"1970-01-01T00:05:00Z"}`
	tests := []struct {
		name        string
		forge       bool // the pod's owner writes the hold; nothing preempts
		restartKey  []byte
		wantHeld    bool
		wantIgnored float64
	}{
		{name: "same key", restartKey: key, wantHeld: true},
		{name: "another key", restartKey: []byte(strings.Repeat("o", preempt.MinHoldKeyBytes)), wantIgnored: 1},
		{name: "random key of the restarted process", wantIgnored: 1},
		{name: "written by the pod's owner", forge: true, restartKey: key, wantIgnored: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := &evictions{}
			p := high("p")
			if tt.forge {
				p.Annotations[contract.DefaultPreemptionKey] = forged
			}
			e := cardsEnv(t, ev, []int64{16, 16}, []scheduler.Option{scheduler.WithHoldKey(key)}, low("a", 0, 6), low("b", 0, 4), low("c", 1, 10), p)
			if !tt.forge {
				preemptVerb(e, p, "b")
			}
			e.cache.RemovePod(low("b", 0, 4)) // card 0: 10 GiB free
			opts := []scheduler.Option{scheduler.WithPodLister(podLister(t, e))}
			if tt.restartKey != nil {
				opts = append(opts, scheduler.WithHoldKey(tt.restartKey))
			}
			restarted := scheduler.NewExtender(e.cache, e.client, newPolicy(t, "binpack"), contract.DefaultNames(), append(opts, scheduler.WithClock(fixedClock))...)
			logger, _ := ktesting.NewTestContext(t)
			if err := restarted.RebuildHolds(logger); err != nil {
				t.Fatal(err)
			}
			args := &extenderv1.ExtenderArgs{Pod: prio(st.MakePod().Name("late").GPUMem(8).Obj(), 0, false), NodeNames: &[]string{"n1"}}
			if fits := len(*restarted.Filter(e.ctx, args).NodeNames) == 1; fits == tt.wantHeld {
				t.Errorf("a lower-priority 8 GiB pod fits card 0: %v; want the hold kept: %v", fits, tt.wantHeld)
			}
			if got := counter(t, restarted.Metrics(), "gpushare_preemption_holds_ignored_total"); got != tt.wantIgnored {
				t.Errorf("gpushare_preemption_holds_ignored_total = %g, want %g", got, tt.wantIgnored)
			}
		})
	}
}

// fixedClock is newEnvOpts's clock.
func fixedClock() time.Time { return time.Unix(0, 1000) }

// podLister is the fake API's pods as an informer would list them.
func podLister(t *testing.T, e *env) corelisters.PodLister {
	t.Helper()
	list, err := e.client.CoreV1().Pods("").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	index := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	for i := range list.Items {
		if err := index.Add(&list.Items[i]); err != nil {
			t.Fatal(err)
		}
	}
	return corelisters.NewPodLister(index)
}

// TestPreemptPutOffWhileFreeElsewhere: kube-scheduler offers the preempt verb only n1 (full),
// while n2, which it did not offer (its snapshot lagging the extender's), has room for the pod
// now. The extender puts the preemption off for a few seconds of retries instead of evicting,
// then preempts; a pod that n2 refuses (its node selector) preempts at once.
func TestPreemptPutOffWhileFreeElsewhere(t *testing.T) {
	tests := []struct {
		name string
		pod  *v1.Pod
		// wantEvicted after each call, the clock stepped by step before it
		steps       []time.Duration
		wantEvicted []int
	}{
		{name: "fits on n2: put off for 5 s", pod: high("p"), steps: []time.Duration{0, 4 * time.Second, 2 * time.Second}, wantEvicted: []int{0, 0, 1}},
		{name: "n2 refuses the pod: preempts at once", pod: func() *v1.Pod {
			p := high("p")
			p.Spec.NodeSelector = map[string]string{"zone": "a"}
			return p
		}(), steps: []time.Duration{0}, wantEvicted: []int{1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := &evictions{}
			clock := servertesting.NewFakeClock()
			nodes := []*v1.Node{st.MakeNode("n1").GPUs(16).Label("zone", "a").Obj(), st.MakeNode("n2").GPUs(16).Obj()}
			e := newEnvOpts(t, newPolicy(t, "binpack"), []scheduler.Option{scheduler.WithClock(clock.Now)}, nodes, low("v", 0, 16), tt.pod)
			ev.install(e.client)
			for i, step := range tt.steps {
				clock.Step(step)
				preemptVerb(e, tt.pod, "v")
				if got := len(ev.done()); got != tt.wantEvicted[i] {
					t.Errorf("call %d: %d evicted, want %d", i, got, tt.wantEvicted[i])
				}
			}
		})
	}
}
