package scheduler_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

func bindArgs(pod, node string) *extenderv1.ExtenderBindingArgs {
	return &extenderv1.ExtenderBindingArgs{PodName: pod, PodNamespace: "default", PodUID: types.UID("uid-" + pod), Node: node}
}

func failOn(verb, sub string) k8stesting.ReactionFunc {
	return func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetVerb() == verb && action.GetSubresource() == sub {
			return true, nil, errors.New("injected " + verb + " failure")
		}
		return false, nil, nil
	}
}

func TestBind(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode("n1").GPUs(16, 16).Obj(), st.MakeNode("n2").GPUs(16).Obj()}
	full := st.MakePod().Name("x").GPUMem(10).Node("n1").Placement(`{"0":{"0":10}}`).Obj()
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
		{name: "binds on the tightest card", pods: []*v1.Pod{full, st.MakePod().Name("p").GPUMem(4).Obj()},
			args: bindArgs("p", "n1"), wantNode: "n1", wantAlloc: `{"0":{"0":4}}`, wantCache: []int64{14, 0}},
		{name: "multi-container", pods: []*v1.Pod{full, st.MakePod().Name("p").GPUMem(6).GPUMem(8).Obj()},
			args: bindArgs("p", "n1"), wantNode: "n1", wantAlloc: `{"0":{"0":6},"1":{"1":8}}`, wantCache: []int64{16, 8}},
		{name: "retry of a bound pod keeps its card", pods: []*v1.Pod{full,
			st.MakePod().Name("p").GPUMem(4).Node("n1").Placement(`{"0":{"1":4}}`).Obj()},
			args: bindArgs("p", "n1"), wantNode: "n1", wantAlloc: `{"0":{"1":4}}`, wantCache: []int64{10, 4}},
		{name: "bound elsewhere is refused", pods: []*v1.Pod{st.MakePod().Name("p").GPUMem(4).Node("n2").Placement(`{"0":{"0":4}}`).Obj()},
			args: bindArgs("p", "n1"), wantErr: "already bound to another node", wantNode: "n2", wantAlloc: `{"0":{"0":4}}`, wantCache: []int64{0, 0}},
		{name: "binding failure rolls back", pods: []*v1.Pod{full, st.MakePod().Name("p").GPUMem(4).Obj()},
			inject: failOn("create", "binding"), args: bindArgs("p", "n1"), wantErr: "injected create failure", wantCache: []int64{10, 0}},
		{name: "patch failure rolls back", pods: []*v1.Pod{full, st.MakePod().Name("p").GPUMem(4).Obj()},
			inject: failOn("patch", ""), args: bindArgs("p", "n1"), wantErr: "injected patch failure", wantCache: []int64{10, 0}},
		{name: "does not fit", pods: []*v1.Pod{full, st.MakePod().Name("p").GPUMem(17).Obj()},
			args: bindArgs("p", "n1"), wantErr: "largest GPU has 16 GiB", wantCache: []int64{10, 0}},
		{name: "recreated pod", pods: []*v1.Pod{st.MakePod().Name("p").UID("other").GPUMem(4).Obj()},
			args: bindArgs("p", "n1"), wantErr: "pod was recreated", wantCache: []int64{0, 0}},
		{name: "unknown pod", args: bindArgs("p", "n1"), wantErr: "not found", wantCache: []int64{0, 0}},
		{name: "unknown node", pods: []*v1.Pod{st.MakePod().Name("p").GPUMem(4).Obj()},
			args: bindArgs("p", "ghost"), wantErr: "unknown node", wantCache: []int64{0, 0}},
		{name: "pod without gpu-mem binds without annotations", pods: []*v1.Pod{st.MakePod().Name("p").Container().Obj()},
			args: bindArgs("p", "n1"), wantNode: "n1", wantCache: []int64{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, "binpack", nodes, tt.pods...)
			if tt.inject != nil {
				e.client.PrependReactor("*", "pods", tt.inject)
			}
			err := e.ext.Bind(e.ctx, tt.args)
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

func TestBindWritesTheContractAnnotations(t *testing.T) {
	e := newEnv(t, "binpack", []*v1.Node{st.MakeNode("n1").GPUs(16, 32).Obj()}, st.MakePod().Name("p").GPUMem(20).Obj())
	if err := e.ext.Bind(e.ctx, bindArgs("p", "n1")); err != nil {
		t.Fatal(err)
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

// TestBindRetryInFlight: kube-scheduler retries a bind whose answer it did not get; the
// assumption made by the first attempt is reused, never moved.
func TestBindRetryInFlight(t *testing.T) {
	e := newEnv(t, "binpack", []*v1.Node{st.MakeNode("n1").GPUs(16, 16).Obj()}, st.MakePod().Name("p").GPUMem(4).Obj())
	e.client.PrependReactor("create", "pods", failOn("create", "binding"))
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
	got := e.ext.Preempt(e.ctx, &extenderv1.ExtenderPreemptionArgs{Pod: st.MakePod().GPUMem(12).Obj(), NodeNameToMetaVictims: victims})
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
// kube-scheduler retries the bind of a pod already bound, never for a pod without gpu-mem.
func TestBindLearnsOnceAfterBinding(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode("n1").GPUs(16, 16).Obj()}
	spy := &learnSpy{}
	e := newEnvWith(t, spy, nodes, st.MakePod().Name("p").GPUMem(4).Obj(), st.MakePod().Name("cpu").Container().Obj())
	for _, inject := range []k8stesting.ReactionFunc{failOn("create", "binding"), failOn("patch", "")} {
		e.client.PrependReactor("*", "pods", inject)
		if err := e.ext.Bind(e.ctx, bindArgs("p", "n1")); err == nil {
			t.Fatal("Bind succeeded despite an injected failure")
		}
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
	if err := e.ext.Bind(e.ctx, bindArgs("cpu", "n1")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"4"}, spy.observed); diff != "" {
		t.Errorf("pods learned (-want,+got):\n%s", diff)
	}
}
