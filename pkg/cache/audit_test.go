package cache_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
)

func TestAudit(t *testing.T) {
	names := contract.DefaultNames()
	n1, n2 := st.MakeNode("n1").GPUs(16, 16).Obj(), st.MakeNode("n2").GPUs(16).Obj()
	a := st.MakePod().Name("a").GPUMem(10).Node("n1").Placement(`{"0":{"0":10}}`).Obj()
	b := st.MakePod().Name("b").GPUMem(10).Node("n1").Placement(`{"0":{"0":10}}`).Obj() // same card: 20 of 16
	c := st.MakePod().Name("c").GPUMem(4).Node("n2").Placement(`{"0":{"0":4}}`).Obj()
	pending := st.MakePod().Name("d").GPUMem(4).Obj()
	b2 := st.MakePod().Name("b2").UID("uid-b2").GPUMem(4).Node("n1").Placement(`{"0":{"1":4}}`).Obj()
	other := st.MakePod().Namespace("default.a").Name("f").GPUMem(2).Node("n1").Placement(`{"0":{"1":2}}`).Obj()
	tests := []struct {
		name      string
		live      func(c cache.Cache) // what the cache saw
		nodes     []*v1.Node          // the API's truth
		pods      []*v1.Pod
		wantOver  []string
		wantDiffs []string
	}{
		{name: "cache equals the API", nodes: []*v1.Node{n1, n2}, pods: []*v1.Pod{a, c},
			live: func(x cache.Cache) { x.SetNode(n1); x.SetNode(n2); x.SetPod(a); x.SetPod(c) }},
		{name: "a card over capacity in the API", nodes: []*v1.Node{n1}, pods: []*v1.Pod{a, b},
			live:     func(x cache.Cache) { x.SetNode(n1); x.SetPod(a); x.SetPod(b) },
			wantOver: []string{"n1 GPU0: 20 of 16 units"}},
		{name: "the cache missed a pod and a node", nodes: []*v1.Node{n1, n2}, pods: []*v1.Pod{a, c},
			live:      func(x cache.Cache) { x.SetNode(n1); x.SetPod(a) },
			wantDiffs: []string{"node n2: in the API, not in the cache"}},
		{name: "the cache holds a deleted pod and an assumed one", nodes: []*v1.Node{n1}, pods: []*v1.Pod{a},
			live: func(x cache.Cache) {
				x.SetNode(n1)
				x.SetPod(a)
				x.SetPod(st.MakePod().Name("gone").GPUMem(2).Node("n1").Placement(`{"0":{"1":2}}`).Obj())
				req, _ := contract.ParseRequest(pending, &names)
				if _, err := x.AssumePod(pending, &req, "n1", contract.Allocation{"0": {1: 4}}); err != nil {
					t.Fatal(err)
				}
			},
			wantDiffs: []string{
				`n1: GPU1 is {Index:1 UUID:GPU-n1-1 Model:Tesla T4 Capacity:16 Used:0 Healthy:true} in the API, {Index:1 UUID:GPU-n1-1 Model:Tesla T4 Capacity:16 Used:6 Healthy:true} in the cache`,
				"n1: pod default/d: Assumed in the cache with map[0:map[1:4]], not bound there in the API",
				"n1: pod default/gone: Bound in the cache with map[0:map[1:2]], not bound there in the API",
			}},
		{name: "the cache missed a pod, placed one elsewhere, and holds one of another namespace", nodes: []*v1.Node{n1}, pods: []*v1.Pod{a, b2, other},
			live: func(x cache.Cache) {
				x.SetNode(n1)
				x.SetPod(st.MakePod().Name("b2").UID("uid-b2").GPUMem(4).Node("n1").Placement(`{"0":{"0":4}}`).Obj())
				x.SetPod(st.MakePod().Namespace("default-x").Name("e").GPUMem(2).Node("n1").Placement(`{"0":{"1":2}}`).Obj())
				x.SetPod(other)
			},
			wantDiffs: []string{
				`n1: GPU0 is {Index:0 UUID:GPU-n1-0 Model:Tesla T4 Capacity:16 Used:10 Healthy:true} in the API, {Index:0 UUID:GPU-n1-0 Model:Tesla T4 Capacity:16 Used:4 Healthy:true} in the cache`,
				`n1: GPU1 is {Index:1 UUID:GPU-n1-1 Model:Tesla T4 Capacity:16 Used:6 Healthy:true} in the API, {Index:1 UUID:GPU-n1-1 Model:Tesla T4 Capacity:16 Used:4 Healthy:true} in the cache`,
				"n1: pod default-x/e: Bound in the cache with map[0:map[1:2]], not bound there in the API",
				"n1: pod default/a: bound in the API, not in the cache",
				"n1: pod default/b2: uid-b2 Bound map[0:map[1:4]] in the API, uid-b2 Bound map[0:map[0:4]] in the cache",
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			live := cache.New(names, logger)
			tt.live(live)
			var nodes []v1.Node
			for _, n := range tt.nodes {
				nodes = append(nodes, *n)
			}
			var pods []v1.Pod
			for _, p := range tt.pods {
				pods = append(pods, *p)
			}
			r := cache.Audit(live, nodes, pods, names)
			if diff := cmp.Diff(tt.wantOver, r.Overcommitted); diff != "" {
				t.Errorf("Overcommitted (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantDiffs, r.Differences); diff != "" {
				t.Errorf("Differences (-want,+got):\n%s", diff)
			}
			if r.OK() != (tt.wantOver == nil && tt.wantDiffs == nil) {
				t.Errorf("OK() = %v", r.OK())
			}
			if got := cache.OvercommittedCards(live.Nodes()); got != len(tt.wantOver) {
				t.Errorf("OvercommittedCards = %d, want %d", got, len(tt.wantOver))
			}
		})
	}
}

// TestAuditOfAFullCluster: a cache fed nodes and pods in one order equals the truth the audit
// builds from them listed in another (each node's snapshot built once, at the end).
func TestAuditOfAFullCluster(t *testing.T) {
	names := contract.DefaultNames()
	logger, _ := ktesting.NewTestContext(t)
	live := cache.New(names, logger)
	var nodes []v1.Node
	var pods []v1.Pod
	for i := range 20 {
		n := st.MakeNode(fmt.Sprintf("n%02d", i)).GPUs(16, 16, 16, 16).Obj()
		nodes = append(nodes, *n)
		for j := range 12 {
			ns := []string{"a", "a-b", "a.b", "ab"}[j%4]
			p := st.MakePod().Namespace(ns).Name(fmt.Sprintf("p%d-%d", i, j)).GPUMem(3).Node(n.Name).
				Placement(fmt.Sprintf(`{"0":{"%d":3}}`, j%4)).Obj()
			pods = append(pods, *p)
		}
	}
	for i := len(pods) - 1; i >= 0; i-- { // pods before their nodes, in reverse
		live.SetPod(&pods[i])
	}
	for i := range nodes {
		live.SetNode(&nodes[i])
	}
	if r := cache.Audit(live, nodes, pods, names); !r.OK() {
		t.Fatalf("Audit found %d differences, %d cards over capacity: %v %v", len(r.Differences), len(r.Overcommitted), r.Differences, r.Overcommitted)
	}
	live.RemovePod(&pods[7])
	r := cache.Audit(live, nodes, pods, names)
	want := []string{fmt.Sprintf("%s: pod %s/%s: bound in the API, not in the cache", pods[7].Spec.NodeName, pods[7].Namespace, pods[7].Name)}
	if len(r.Differences) == 0 || r.Differences[len(r.Differences)-1] != want[0] {
		t.Errorf("after a pod left the cache, Differences = %v, want it to end with %v", r.Differences, want)
	}
}
