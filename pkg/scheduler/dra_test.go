package scheduler_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/scheduler"
)

// fragmented is a small fragmented cluster of two 16-unit cards per node, by units used on
// each card. For a 4-unit ask: on n0 the card the ask fills exactly is card 1, behind card 0,
// which first-fit takes (leaving two 4-unit holes); on n2 first-fit takes card 0 and leaves
// 12 units whole on card 1; n1 is the emptiest node.
var fragmented = []struct {
	node string
	used [2]int64
}{{"n0", [2]int64{8, 12}}, {"n1", [2]int64{2, 0}}, {"n2", [2]int64{10, 6}}}

// learnedPolicy is the named policy, having observed a workload of 2 to 16-unit pods when it
// learns (fgd-online's distribution).
func learnedPolicy(t *testing.T, name string) placement.Policy {
	t.Helper()
	p := newPolicy(t, name)
	if l, ok := p.(placement.Learner); ok {
		for _, u := range []int64{2, 4, 4, 8, 8, 8, 12, 16} {
			l.Observe(&contract.PodRequest{Containers: []contract.ContainerRequest{{Key: "0", Units: u, GPUs: 1}}}, placement.PodResources{MilliCPU: 1000})
		}
	}
	return p
}

// newDRAEnv is an extender in DRA mode over the fragmented cluster: Node objects without GPUs,
// cards as their ResourceSlices publish them and one allocated claim per used card.
func newDRAEnv(t *testing.T, policy string, opts ...scheduler.Option) *env {
	t.Helper()
	var nodes []*v1.Node
	for _, f := range fragmented {
		nodes = append(nodes, st.MakeNode(f.node).Obj())
	}
	e := newEnvOpts(t, learnedPolicy(t, policy), append([]scheduler.Option{scheduler.WithDRA(testDRADriver)}, opts...), nodes)
	for _, f := range fragmented {
		e.cache.SetDRACards(f.node, []placement.GPUInfo{
			{Index: 0, Model: "Tesla T4", Capacity: 16, Healthy: true}, {Index: 1, Model: "Tesla T4", Capacity: 16, Healthy: true}})
		for g, used := range f.used {
			if used == 0 {
				continue
			}
			name := fmt.Sprintf("u-%s-%d", f.node, g)
			e.cache.SetClaim(types.UID("claim-"+name), cache.ClaimCharge{Namespace: "default", Name: name, UID: types.UID("uid-" + name),
				Node: f.node, Container: "0", PerGPU: map[int]int64{g: used}})
		}
	}
	return e
}

// newAnnotatedEnv is the same cluster for an extender without DRA mode: cards and placements
// from the device plugin's annotations.
func newAnnotatedEnv(t *testing.T, policy string, opts ...scheduler.Option) *env {
	t.Helper()
	var nodes []*v1.Node
	var bound []*v1.Pod
	for _, f := range fragmented {
		nodes = append(nodes, st.MakeNode(f.node).GPUs(16, 16).Obj())
		for g, used := range f.used {
			if used > 0 {
				bound = append(bound, st.MakePod().Name(fmt.Sprintf("u-%s-%d", f.node, g)).GPUMem(used).Node(f.node).
					Placement(fmt.Sprintf(`{"0":{"%d":%d}}`, g, used)).Obj())
			}
		}
	}
	return newEnvOpts(t, learnedPolicy(t, policy), opts, nodes, bound...)
}

// draPod is a converted pod: its container "main" asked units of gpu-mem before the
// conversion moved the ask into a claim.
func draPod(name string, units int64) *v1.Pod {
	return st.MakePod().Name(name).NamedGPUMem("main", 0).Annotation(draconvert.AnnotationConverted, fmt.Sprintf(`{"main":%d}`, units)).Obj()
}

// TestDRAFilterPredictsFirstFit: in DRA mode, Filter choosing the node picks the node FGD
// rates best with the card the allocator will take there (first fit in index order): n2.
// Without DRA mode the same policy picks n0, planning card 1 there, which the allocator would
// not take; a spreading (least-allocated) choice picks n1.
func TestDRAFilterPredictsFirstFit(t *testing.T) {
	tests := []struct {
		name   string
		env    func(t *testing.T) *env
		pod    *v1.Pod
		chosen string
	}{
		{name: "DRA mode, fgd-online predicting first-fit", env: func(t *testing.T) *env {
			return newDRAEnv(t, "fgd-online", scheduler.WithFilterChoosing(true))
		}, pod: draPod("p", 4), chosen: "n2"},
		{name: "device-plugin mode, fgd-online choosing the card", env: func(t *testing.T) *env {
			return newAnnotatedEnv(t, "fgd-online", scheduler.WithFilterChoosing(true))
		}, pod: st.MakePod().Name("p").NamedGPUMem("main", 4).Obj(), chosen: "n0"},
		{name: "DRA mode, spread (least allocated)", env: func(t *testing.T) *env {
			return newDRAEnv(t, "spread", scheduler.WithFilterChoosing(true))
		}, pod: draPod("p", 4), chosen: "n1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.env(t)
			names := []string{"n0", "n1", "n2"}
			got := e.ext.Filter(e.ctx, &extenderv1.ExtenderArgs{Pod: tt.pod, NodeNames: &names})
			if diff := cmp.Diff([]string{tt.chosen}, *got.NodeNames); diff != "" {
				t.Errorf("Filter().NodeNames (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDRAPrioritize: in DRA mode Prioritize gives the predicted node the top score, and a pod
// without the conversion annotation passes Filter everywhere with a neutral score (all 0).
func TestDRAPrioritize(t *testing.T) {
	tests := []struct {
		name string
		pod  *v1.Pod
		top  []string // nodes of score MaxExtenderPriority
		zero bool     // every score 0
	}{
		{name: "converted pod", pod: draPod("p", 4), top: []string{"n2"}},
		{name: "pod without the annotation", pod: st.MakePod().Name("q").Container().Obj(), zero: true},
		{name: "pod asking gpu-mem in its spec, not converted", pod: st.MakePod().Name("r").GPUMem(4).Obj(), zero: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newDRAEnv(t, "fgd-online")
			names := []string{"n0", "n1", "n2", "not-a-gpu-node"}
			prio, err := e.ext.Prioritize(e.ctx, &extenderv1.ExtenderArgs{Pod: tt.pod, NodeNames: &names})
			if err != nil {
				t.Fatal(err)
			}
			var top []string
			for _, hp := range prio {
				if tt.zero && hp.Score != 0 {
					t.Errorf("node %s scored %d, want 0", hp.Host, hp.Score)
				}
				if hp.Score == extenderv1.MaxExtenderPriority {
					top = append(top, hp.Host)
				}
			}
			if !tt.zero {
				if diff := cmp.Diff(tt.top, top); diff != "" {
					t.Errorf("top-scored nodes (-want,+got):\n%s", diff)
				}
				return
			}
			got := e.ext.Filter(e.ctx, &extenderv1.ExtenderArgs{Pod: tt.pod, NodeNames: &names})
			if diff := cmp.Diff(names, *got.NodeNames); diff != "" {
				t.Errorf("Filter().NodeNames (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDRARequest: the ask of a converted pod is its annotation's units on the named container,
// with the count annotation splitting it over cards; a malformed annotation fails the pod on
// every node.
func TestDRARequest(t *testing.T) {
	tests := []struct {
		name   string
		pod    *v1.Pod
		passed []string
		failed int
	}{
		{name: "one card of 12 units: only n1 has one", pod: draPod("p", 12), passed: []string{"n1"}},
		{name: "two cards of 6 units each: n2 too, not n0", pod: st.MakePod().Name("p").NamedGPUMem("main", 0).
			Annotation(draconvert.AnnotationConverted, `{"main":12}`).Annotation(contract.DefaultNames().GPUCountAnnotation, "2").Obj(),
			passed: []string{"n1", "n2"}},
		{name: "malformed annotation", pod: st.MakePod().Name("p").NamedGPUMem("main", 0).
			Annotation(draconvert.AnnotationConverted, `{"main":`).Obj(), failed: 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newDRAEnv(t, "fgd-online")
			names := []string{"n0", "n1", "n2"}
			got := e.ext.Filter(e.ctx, &extenderv1.ExtenderArgs{Pod: tt.pod, NodeNames: &names})
			if diff := cmp.Diff(tt.passed, *got.NodeNames); tt.failed == 0 && diff != "" {
				t.Errorf("Filter().NodeNames (-want,+got):\n%s", diff)
			}
			if n := len(got.FailedNodes) + len(got.FailedAndUnresolvableNodes); n != tt.failed && tt.failed > 0 {
				t.Errorf("Filter() failed %d nodes, want %d: %+v", n, tt.failed, got)
			}
		})
	}
}

// TestDRAVerbs: in DRA mode the extender serves filter and prioritize and offers neither bind
// nor preempt (kube-scheduler binds and preempts); without it, it offers all four.
func TestDRAVerbs(t *testing.T) {
	tests := []struct {
		dra  bool
		want map[string]int
	}{
		{dra: true, want: map[string]int{"filter": http.StatusOK, "prioritize": http.StatusOK, "bind": http.StatusNotFound, "preempt": http.StatusNotFound}},
		{dra: false, want: map[string]int{"filter": http.StatusOK, "prioritize": http.StatusOK, "bind": http.StatusOK, "preempt": http.StatusOK}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("dra=%v", tt.dra), func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			e := newEnvOpts(t, newPolicy(t, "binpack"), []scheduler.Option{scheduler.WithDRA(map[bool]string{true: testDRADriver}[tt.dra])}, nil)
			srv := httptest.NewServer(scheduler.NewHandler(e.ext, func() bool { return true }, scheduler.HandlerConfig{MaxBody: 1 << 20}, logger))
			defer srv.Close()
			got := map[string]int{}
			for verb := range tt.want {
				body := `{"pod":{"metadata":{"name":"p","namespace":"default","uid":"u"}},"nodenames":[]}`
				if verb == "bind" {
					body = `{"podName":"p","podNamespace":"default","podUID":"u","node":"n0"}`
				}
				resp, err := http.Post(srv.URL+scheduler.Prefix+"/"+verb, "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close()
				got[verb] = resp.StatusCode
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("status per verb (-want,+got):\n%s", diff)
			}
		})
	}
}
