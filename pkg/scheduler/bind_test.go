package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	k8stesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/scheduler"
)

func bindArgs(pod, node string) *extenderv1.ExtenderBindingArgs {
	return &extenderv1.ExtenderBindingArgs{PodName: pod, PodNamespace: "default", PodUID: types.UID("uid-" + pod), Node: node}
}

// failOn fails every verb call on the subresource sub of pods with an error that says nothing
// about whether the API server applied it (a timeout, a broken connection).
func failOn(verb, sub string) k8stesting.ReactionFunc {
	return failWith(verb, sub, errors.New("injected "+verb+" failure"))
}

// refuseOn fails them with the API server's definite refusal.
func refuseOn(verb, sub string) k8stesting.ReactionFunc {
	return failWith(verb, sub, apierrors.NewForbidden(v1.Resource("pods"), "p", errors.New("injected "+verb+" refusal")))
}

func failWith(verb, sub string, err error) k8stesting.ReactionFunc {
	return func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetVerb() == verb && action.GetSubresource() == sub {
			return true, nil, err
		}
		return false, nil, nil
	}
}

func TestBind(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode("n1").GPUs(16, 16).Label("zone", "a").Taint("gpu", "shared", v1.TaintEffectNoSchedule).Obj(),
		st.MakeNode("n2").GPUs(16).Obj()}
	full := st.MakePod().Name("x").GPUMem(10).Node("n1").Placement(`{"0":{"0":10}}`).Obj()
	// pod is a pending pod asking units, tolerating n1's taint as GPU pods there must.
	pod := func(units int64) *st.PodWrapper {
		return st.MakePod().Name("p").GPUMem(units).Tolerate("gpu", "shared", v1.TaintEffectNoSchedule)
	}
	tests := []struct {
		name      string
		pods      []*v1.Pod
		inject    k8stesting.ReactionFunc
		args      *extenderv1.ExtenderBindingArgs
		wantErr   string
		wantNode  string
		wantAlloc string // placement annotation on the API pod afterwards; "" for none
		wantCache []int64
	}{
		{name: "binds on the tightest card", pods: []*v1.Pod{full, pod(4).Obj()},
			args: bindArgs("p", "n1"), wantNode: "n1", wantAlloc: `{"0":{"0":4}}`, wantCache: []int64{14, 0}},
		{name: "multi-container", pods: []*v1.Pod{full, pod(6).GPUMem(8).Obj()},
			args: bindArgs("p", "n1"), wantNode: "n1", wantAlloc: `{"0":{"0":6},"1":{"1":8}}`, wantCache: []int64{16, 8}},
		{name: "retry of a bound pod keeps its card", pods: []*v1.Pod{full,
			st.MakePod().Name("p").GPUMem(4).Node("n1").Placement(`{"0":{"1":4}}`).Obj()},
			args: bindArgs("p", "n1"), wantNode: "n1", wantAlloc: `{"0":{"1":4}}`, wantCache: []int64{10, 4}},
		{name: "bound elsewhere is refused", pods: []*v1.Pod{st.MakePod().Name("p").GPUMem(4).Node("n2").Placement(`{"0":{"0":4}}`).Obj()},
			args: bindArgs("p", "n1"), wantErr: "already bound to another node", wantNode: "n2", wantAlloc: `{"0":{"0":4}}`, wantCache: []int64{0, 0}},
		{name: "binding refused rolls back", pods: []*v1.Pod{full, pod(4).Obj()},
			inject: refuseOn("create", "binding"), args: bindArgs("p", "n1"), wantErr: "injected create refusal", wantCache: []int64{10, 0}},
		{name: "no patch: the placement rides on the Binding", pods: []*v1.Pod{full, pod(4).Obj()},
			inject: failOn("patch", ""), args: bindArgs("p", "n1"), wantNode: "n1", wantAlloc: `{"0":{"0":4}}`, wantCache: []int64{14, 0}},
		{name: "does not fit", pods: []*v1.Pod{full, pod(17).Obj()},
			args: bindArgs("p", "n1"), wantErr: "largest GPU has 16 GiB", wantCache: []int64{10, 0}},
		{name: "recreated pod", pods: []*v1.Pod{st.MakePod().Name("p").UID("other").GPUMem(4).Obj()},
			args: bindArgs("p", "n1"), wantErr: "pod was recreated", wantCache: []int64{0, 0}},
		{name: "unknown pod", args: bindArgs("p", "n1"), wantErr: "not found", wantCache: []int64{0, 0}},
		{name: "unknown node", pods: []*v1.Pod{pod(4).Obj()},
			args: bindArgs("p", "ghost"), wantErr: "unknown node", wantCache: []int64{0, 0}},
		{name: "pod without gpu-mem is refused", pods: []*v1.Pod{st.MakePod().Name("p").Container().Tolerate("gpu", "shared", v1.TaintEffectNoSchedule).Obj()},
			args: bindArgs("p", "n1"), wantErr: "the extender binds only pods it places on GPUs (it asks no aliyun.com/gpu-mem)", wantCache: []int64{0, 0}},
		{name: "node selector matches", pods: []*v1.Pod{full, pod(4).NodeSelector("zone", "a").Obj()},
			args: bindArgs("p", "n1"), wantNode: "n1", wantAlloc: `{"0":{"0":4}}`, wantCache: []int64{14, 0}},
		{name: "node selector of another node is refused", pods: []*v1.Pod{full, pod(4).NodeSelector("zone", "b").Obj()},
			args: bindArgs("p", "n1"), wantErr: "may not run on the node: its node selector or required node affinity does not match", wantCache: []int64{10, 0}},
		{name: "untolerated taint is refused", pods: []*v1.Pod{full, st.MakePod().Name("p").GPUMem(4).Obj()},
			args: bindArgs("p", "n1"), wantErr: "it does not tolerate the taint gpu=shared:NoSchedule", wantCache: []int64{10, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "binpack", nodes, tt.pods...)
			if tt.inject != nil {
				e.client.PrependReactor("*", "pods", tt.inject)
			}
			err := e.ext.Bind(e.ctx, tt.args)
			e.ext.WaitSettled(e.ctx)
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("Bind() error = %v, want %q", err, tt.wantErr)
			}
			if len(tt.pods) > 0 {
				got := e.apiPod(t, "p")
				if got.Spec.NodeName != tt.wantNode {
					t.Errorf("nodeName = %q, want %q", got.Spec.NodeName, tt.wantNode)
				}
				if a := got.Annotations[contract.AnnotationAllocation]; a != tt.wantAlloc {
					t.Errorf("placement annotation = %q, want %q", a, tt.wantAlloc)
				}
			}
			n, _ := e.cache.Node("n1")
			if diff := cmp.Diff(tt.wantCache, []int64{n.GPUs[0].Used, n.GPUs[1].Used}); diff != "" {
				t.Errorf("cache n1 used (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestBindWritesTheContractAnnotations: one write binds the pod, a Binding that carries the
// contract's annotations (the API server copies them onto the pod with spec.nodeName).
func TestBindWritesTheContractAnnotations(t *testing.T) {
	e := newEnv(t, "binpack", []*v1.Node{st.MakeNode("n1").GPUs(16, 32).Obj()}, st.MakePod().Name("p").GPUMem(20).Obj())
	e.client.ClearActions()
	if err := e.ext.Bind(e.ctx, bindArgs("p", "n1")); err != nil {
		t.Fatal(err)
	}
	var writes []string
	for _, a := range e.client.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			writes = append(writes, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
		}
	}
	if diff := cmp.Diff([]string{"create pods/binding"}, writes); diff != "" {
		t.Errorf("API writes of one bind (-want,+got):\n%s", diff)
	}
	want := map[string]string{
		contract.AnnotationIndex: "1", contract.AnnotationPod: "20", contract.AnnotationDev: "32",
		contract.AnnotationAssigned: "false", contract.AnnotationAssumeTime: "1000",
		contract.AnnotationAllocation: `{"0":{"1":20}}`,
	}
	if diff := cmp.Diff(want, e.apiPod(t, "p").Annotations); diff != "" {
		t.Errorf("annotations (-want,+got):\n%s", diff)
	}
	p, ok := e.cache.Pod("uid-p")
	if !ok || p.State != placement.PodAssumed {
		t.Errorf("cache state = %+v, want Assumed", p)
	}
}

// TestBindRetryAfterRefusal: kube-scheduler retries a bind the API server refused; the first
// attempt's charge is gone, and the retry plans afresh.
func TestBindRetryAfterRefusal(t *testing.T) {
	e := newEnv(t, "binpack", []*v1.Node{st.MakeNode("n1").GPUs(16, 16).Obj()}, st.MakePod().Name("p").GPUMem(4).Obj())
	e.client.PrependReactor("create", "pods", failWith("create", "binding", apierrors.NewTooManyRequests("injected", 1)))
	if err := e.ext.Bind(e.ctx, bindArgs("p", "n1")); err == nil {
		t.Fatal("first Bind() succeeded despite the injected failure")
	}
	// A bound pod arrives on card 0 meanwhile; the retry must still succeed and agree with the cache.
	e.cache.SetPod(st.MakePod().Name("x").GPUMem(14).Node("n1").Placement(`{"0":{"0":14}}`).Obj())
	e.client.ReactionChain = e.client.ReactionChain[1:]
	if err := e.ext.Bind(e.ctx, bindArgs("p", "n1")); err != nil {
		t.Fatal(err)
	}
	if got := e.apiPod(t, "p").Annotations[contract.AnnotationAllocation]; got != `{"0":{"1":4}}` {
		t.Errorf("placement = %s, want card 1", got)
	}
}

// TestPreempt: with --gpu-preemption=false, the verb keeps kube-scheduler's proposed nodes where
// the pod's memory fits once the proposed victims are gone.
func TestPreempt(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode("n1").GPUs(16).Obj(), st.MakeNode("n2").GPUs(16).Obj()}
	e := newEnv(t, "binpack", nodes,
		st.MakePod().Name("a").GPUMem(10).Node("n1").Placement(`{"0":{"0":10}}`).Obj(),
		st.MakePod().Name("b").GPUMem(4).Node("n2").Placement(`{"0":{"0":4}}`).Obj(),
		st.MakePod().Name("c").GPUMem(8).Node("n2").Placement(`{"0":{"0":8}}`).Obj())
	victims := map[string]*extenderv1.MetaVictims{
		"n1": {Pods: []*extenderv1.MetaPod{{UID: "uid-a"}}},
		"n2": {Pods: []*extenderv1.MetaPod{{UID: "uid-b"}}}, // 4 freed: 8 free, not enough
	}
	ext := scheduler.NewExtender(e.cache, e.client, newPolicy(t, "binpack"), contract.DefaultNames(), scheduler.WithPreemption(false))
	got := ext.Preempt(e.ctx, &extenderv1.ExtenderPreemptionArgs{Pod: st.MakePod().GPUMem(12).Obj(), NodeNameToMetaVictims: victims})
	want := map[string]*extenderv1.MetaVictims{"n1": victims["n1"]}
	if diff := cmp.Diff(want, got.NodeNameToMetaVictims); diff != "" {
		t.Errorf("Preempt() (-want,+got):\n%s", diff)
	}
}

// learnSpy is binpack that counts the pods it is told to learn.
type learnSpy struct {
	placement.Binpack
	observed []string
}

func (l *learnSpy) Observe(req *contract.PodRequest, _ placement.PodResources) {
	l.observed = append(l.observed, fmt.Sprint(req.TotalUnits()))
}

func (l *learnSpy) Rebuild([]*placement.NodeInfo) {}

// TestBindLearnsOnceAfterBinding: a learning policy learns a pod once, when its Binding has
// been created: not when the Binding or the annotation patch fails, not again when
// kube-scheduler retries the bind of a pod already bound, never for a pod without gpu-mem (refused).
func TestBindLearnsOnceAfterBinding(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode("n1").GPUs(16, 16).Obj()}
	spy := &learnSpy{}
	e := newEnvWith(t, spy, nodes, st.MakePod().Name("p").GPUMem(4).Obj(), st.MakePod().Name("cpu").Container().Obj())
	for _, inject := range []k8stesting.ReactionFunc{refuseOn("create", "binding")} {
		e.client.PrependReactor("*", "pods", inject)
		if err := e.ext.Bind(e.ctx, bindArgs("p", "n1")); err == nil {
			t.Fatal("Bind succeeded despite an injected failure")
		}
		e.ext.WaitSettled(e.ctx)
		e.client.ReactionChain = e.client.ReactionChain[1:]
		if len(spy.observed) != 0 {
			t.Fatalf("learned %v from a failed bind", spy.observed)
		}
	}
	for range 2 { // the second call is kube-scheduler retrying a bind that landed
		if err := e.ext.Bind(e.ctx, bindArgs("p", "n1")); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.ext.Bind(e.ctx, bindArgs("cpu", "n1")); !errors.Is(err, scheduler.ErrNotManaged) {
		t.Fatalf("Bind of a pod without gpu-mem = %v, want ErrNotManaged", err)
	}
	if diff := cmp.Diff([]string{"4"}, spy.observed); diff != "" {
		t.Errorf("pods learned (-want,+got):\n%s", diff)
	}
}

// flaky fails the first n Binding calls with an error of unknown outcome; when landed is set, a
// failed call still binds the pod first, as a Binding whose answer was lost. Later calls go on.
func flaky(client *fake.Clientset, n int, landed bool) k8stesting.ReactionFunc {
	var mu sync.Mutex
	calls := 0
	bind := bindingReactor(client)
	return func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetVerb() != "create" || action.GetSubresource() != "binding" {
			return false, nil, nil
		}
		mu.Lock()
		calls++
		fail := calls <= n
		mu.Unlock()
		if !fail {
			return false, nil, nil
		}
		if landed {
			_, _, _ = bind(action) // the Binding lands; its answer is lost
		}
		return true, nil, fmt.Errorf("injected: %w", context.DeadlineExceeded)
	}
}

// TestBindUnknownOutcome: a Binding call that fails without saying whether it bound the pod
// keeps the pod's charge, and the extender settles it from the API server: bound (the card
// stays taken and the pod is learned once) or refused (the charge goes; the pod never had the
// annotations, which travel on the Binding).
func TestBindUnknownOutcome(t *testing.T) {
	tests := []struct {
		name      string
		inject    func(*fake.Clientset) k8stesting.ReactionFunc
		wantNode  string
		wantAlloc string
		wantUsed  int64 // on card 0 after settling
		wantLearn int
	}{
		{name: "the Binding had landed", inject: func(c *fake.Clientset) k8stesting.ReactionFunc { return flaky(c, 1, true) },
			wantNode: "n1", wantAlloc: `{"0":{"0":4}}`, wantUsed: 14, wantLearn: 1},
		{name: "the API server was away for three calls", inject: func(c *fake.Clientset) k8stesting.ReactionFunc { return flaky(c, 3, false) },
			wantNode: "n1", wantAlloc: `{"0":{"0":4}}`, wantUsed: 14, wantLearn: 1},
		{name: "the API server then refused it", inject: func(c *fake.Clientset) k8stesting.ReactionFunc {
			first := flaky(c, 1, false)
			refuse := refuseOn("create", "binding")
			var once sync.Once
			return func(a k8stesting.Action) (bool, runtime.Object, error) {
				handled := false
				once.Do(func() { handled = true })
				if handled {
					return first(a)
				}
				return refuse(a)
			}
		}, wantUsed: 10},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spy := &learnSpy{}
			full := st.MakePod().Name("x").GPUMem(10).Node("n1").Placement(`{"0":{"0":10}}`).Obj()
			e := newEnvWith(t, spy, []*v1.Node{st.MakeNode("n1").GPUs(16, 16).Obj()}, full, st.MakePod().Name("p").GPUMem(4).Obj())
			e.client.PrependReactor("create", "pods", tt.inject(e.client))
			err := e.ext.Bind(e.ctx, bindArgs("p", "n1"))
			if err == nil || !strings.Contains(err.Error(), "outcome unknown") {
				t.Fatalf("Bind() = %v, want an error of unknown outcome", err)
			}
			if n, _ := e.cache.Node("n1"); tt.wantNode != "" && n.GPUs[0].Used != 14 { // (a refusal may already be settled)
				t.Errorf("right after the failure card 0 holds %d units, want 14: the charge must stay until settled", n.GPUs[0].Used)
			}
			e.ext.WaitSettled(e.ctx)
			got := e.apiPod(t, "p")
			if got.Spec.NodeName != tt.wantNode || got.Annotations[contract.AnnotationAllocation] != tt.wantAlloc {
				t.Errorf("pod on %q with placement %q, want %q and %q", got.Spec.NodeName, got.Annotations[contract.AnnotationAllocation], tt.wantNode, tt.wantAlloc)
			}
			if n, _ := e.cache.Node("n1"); n.GPUs[0].Used != tt.wantUsed {
				t.Errorf("after settling card 0 holds %d units, want %d", n.GPUs[0].Used, tt.wantUsed)
			}
			if len(spy.observed) != tt.wantLearn {
				t.Errorf("learned %v, want %d pod(s)", spy.observed, tt.wantLearn)
			}
			if tt.wantNode != "" { // kube-scheduler's retry of the bind it saw fail
				if err := e.ext.Bind(e.ctx, bindArgs("p", "n1")); err != nil {
					t.Errorf("retried Bind() = %v", err)
				}
				if len(spy.observed) != tt.wantLearn {
					t.Errorf("learned %v after the retry, want %d pod(s)", spy.observed, tt.wantLearn)
				}
			}
		})
	}
}

// TestBindUnsettledThenRetriedElsewhere: when settling gives up (the API server stays away),
// the pod keeps its charge; once a later bind reads the pod unbound from the API server, with
// no other bind of it under way, that stale charge gives way to the new placement.
func TestBindUnsettledThenRetriedElsewhere(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode("n1").GPUs(16).Obj(), st.MakeNode("n2").GPUs(16).Obj()}
	e := newEnv(t, "binpack", nodes, st.MakePod().Name("p").GPUMem(4).Obj())
	e.client.PrependReactor("create", "pods", flaky(e.client, 1000, false))
	if err := e.ext.Bind(e.ctx, bindArgs("p", "n1")); err == nil {
		t.Fatal("Bind() succeeded with the API server away")
	}
	e.ext.WaitSettled(e.ctx)
	if p, ok := e.cache.Pod("uid-p"); !ok || p.Node != "n1" {
		t.Fatalf("after giving up, cache holds %+v, want the pod still charged on n1", p)
	}
	e.client.ReactionChain = e.client.ReactionChain[1:]
	if err := e.ext.Bind(e.ctx, bindArgs("p", "n2")); err != nil {
		t.Fatal(err)
	}
	n1, _ := e.cache.Node("n1")
	n2, _ := e.cache.Node("n2")
	if n1.GPUs[0].Used != 0 || n2.GPUs[0].Used != 4 {
		t.Errorf("cards used n1=%d n2=%d, want 0 and 4", n1.GPUs[0].Used, n2.GPUs[0].Used)
	}
}

// TestBindKeepsTheChargeOfAPodBoundMeanwhile: a retried bind that read the pod just before the
// first bind landed finds the first bind's assumption on another node with no bind under way.
// The pod is bound (the informer has not said so yet), so its charge must stay: forgetting it
// let another pod take the memory and put the card over capacity once the informer confirmed
// the first bind (seen as 7 of 5 units in TestConcurrentBindAndInformerEvents).
func TestBindKeepsTheChargeOfAPodBoundMeanwhile(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode("n1").GPUs(16, 16).Obj(), st.MakeNode("n2").GPUs(16).Obj()}
	pending := st.MakePod().Name("p").GPUMem(4).Obj()
	e := newEnv(t, "binpack", nodes, pending)
	alloc := contract.Allocation{"0": {0: 4}}
	names := contract.DefaultNames()
	req, err := contract.ParseRequest(pending, &names)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.cache.AssumePod(pending, &req, "n1", alloc); err != nil { // the first bind's charge
		t.Fatal(err)
	}
	bound := st.MakePod().Name("p").GPUMem(4).Node("n1").Allocation(alloc).Obj() // and its Binding landed
	if _, err := e.client.CoreV1().Pods("default").Update(e.ctx, bound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale := true // the retried bind's first read is from before the Binding
	e.client.PrependReactor("get", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		if stale {
			stale = false
			return true, pending.DeepCopy(), nil
		}
		return false, nil, nil
	})
	if err := e.ext.Bind(e.ctx, bindArgs("p", "n2")); !errors.Is(err, scheduler.ErrAlreadyBound) {
		t.Fatalf("Bind() = %v, want ErrAlreadyBound", err)
	}
	n1, _ := e.cache.Node("n1")
	n2, _ := e.cache.Node("n2")
	if diff := cmp.Diff([]int64{4, 0, 0}, []int64{n1.GPUs[0].Used, n1.GPUs[1].Used, n2.GPUs[0].Used}); diff != "" {
		t.Errorf("units used on n1 GPU0, n1 GPU1, n2 GPU0 (-want,+got):\n%s", diff)
	}
}

// TestBindReadsThePodFromTheInformer: with the pod in the informer (same UID), a bind is one API
// call, the Binding; without it, or with another pod of that name, the pod is read first.
func TestBindReadsThePodFromTheInformer(t *testing.T) {
	pod := st.MakePod().Name("p").GPUMem(4).Obj()
	recreated := st.MakePod().Name("p").UID("old-uid").GPUMem(4).Obj()
	for _, tc := range []struct {
		name     string
		informer []*v1.Pod
		want     []string
	}{
		{"informer has the pod", []*v1.Pod{pod}, []string{"create pods/binding"}},
		{"informer lacks the pod", nil, []string{"get pods/", "create pods/binding"}},
		{"informer has an older pod of that name", []*v1.Pod{recreated}, []string{"get pods/", "create pods/binding"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, "binpack", []*v1.Node{st.MakeNode("n1").GPUs(16).Obj()}, pod)
			index := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
			for _, p := range tc.informer {
				if err := index.Add(p); err != nil {
					t.Fatal(err)
				}
			}
			ext := scheduler.NewExtender(e.cache, e.client, newPolicy(t, "binpack"), contract.DefaultNames(), scheduler.WithPodLister(corelisters.NewPodLister(index)))
			e.client.ClearActions()
			if err := ext.Bind(e.ctx, bindArgs("p", "n1")); err != nil {
				t.Fatal(err)
			}
			var calls []string
			for _, a := range e.client.Actions() {
				calls = append(calls, a.GetVerb()+" "+a.GetResource().Resource+"/"+a.GetSubresource())
			}
			if diff := cmp.Diff(tc.want, calls); diff != "" {
				t.Errorf("API calls of one bind (-want,+got):\n%s", diff)
			}
			if got := e.apiPod(t, "p"); got.Spec.NodeName != "n1" || got.Annotations[contract.AnnotationAllocation] != `{"0":{"0":4}}` {
				t.Errorf("pod on %q with placement %q, want n1 and GPU 0", got.Spec.NodeName, got.Annotations[contract.AnnotationAllocation])
			}
		})
	}
}
