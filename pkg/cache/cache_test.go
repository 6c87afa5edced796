package cache_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// event is one call on the cache.
type event func(t *testing.T, c cache.Cache)

func setNode(n *v1.Node) event { return func(_ *testing.T, c cache.Cache) { c.SetNode(n) } }
func setPod(p *v1.Pod) event   { return func(_ *testing.T, c cache.Cache) { c.SetPod(p) } }
func removePod(p *v1.Pod) event {
	return func(_ *testing.T, c cache.Cache) { c.RemovePod(p) }
}
func forget(uid string) event {
	return func(_ *testing.T, c cache.Cache) { c.ForgetPod(types.UID(uid)) }
}
func assume(p *v1.Pod, node, alloc string, wantErr error) event {
	return func(t *testing.T, c cache.Cache) {
		t.Helper()
		names := contract.DefaultNames()
		req, err := contract.ParseRequest(p, &names)
		if err != nil {
			t.Fatal(err)
		}
		a, err := contract.DecodeAllocation(alloc)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.AssumePod(p, &req, node, a); !errors.Is(err, wantErr) {
			t.Fatalf("AssumePod() error = %v, want %v", err, wantErr)
		}
	}
}

// usage is what a test checks of a node: used units per GPU and pending units.
type usage struct {
	Used    []int64
	Pending int64
}

func usageOf(n *placement.NodeInfo) usage {
	u := usage{Pending: n.PendingUnits}
	for _, g := range n.GPUs {
		u.Used = append(u.Used, g.Used)
	}
	return u
}

func TestCacheStateMachine(t *testing.T) {
	node := st.MakeNode("n1").GPUs(16, 16).Obj()
	p := func(name string) *st.PodWrapper { return st.MakePod().Name(name).GPUMem(4) }
	tests := []struct {
		name   string
		events []event
		want   map[string]usage // node → usage; absent nodes must be unknown
	}{
		{name: "assumed pod is charged", events: []event{setNode(node), assume(p("a").Obj(), "n1", `{"0":{"1":4}}`, nil)},
			want: map[string]usage{"n1": {Used: []int64{0, 4}}}},
		{name: "informer confirms the assumption", events: []event{setNode(node),
			assume(p("a").Obj(), "n1", `{"0":{"1":4}}`, nil),
			setPod(p("a").Node("n1").Placement(`{"0":{"1":4}}`).Obj())},
			want: map[string]usage{"n1": {Used: []int64{0, 4}}}},
		{name: "forget releases an assumption", events: []event{setNode(node),
			assume(p("a").Obj(), "n1", `{"0":{"1":4}}`, nil), forget("uid-a")},
			want: map[string]usage{"n1": {Used: []int64{0, 0}}}},
		{name: "forget keeps a bound pod", events: []event{setNode(node),
			setPod(p("a").Node("n1").Placement(`{"0":{"0":4}}`).Obj()), forget("uid-a")},
			want: map[string]usage{"n1": {Used: []int64{4, 0}}}},
		{name: "unbound pod updates keep the assumption", events: []event{setNode(node),
			assume(p("a").Obj(), "n1", `{"0":{"1":4}}`, nil), setPod(p("a").Placement(`{"0":{"1":4}}`).Obj())},
			want: map[string]usage{"n1": {Used: []int64{0, 4}}}},
		{name: "bound without placement is pending", events: []event{setNode(node), setPod(p("a").Node("n1").Obj())},
			want: map[string]usage{"n1": {Used: []int64{0, 0}, Pending: 4}}},
		{name: "garbage placement is pending", events: []event{setNode(node), setPod(p("a").Node("n1").Placement("{oops").Obj())},
			want: map[string]usage{"n1": {Used: []int64{0, 0}, Pending: 4}}},
		{name: "placement on a missing GPU is pending", events: []event{setNode(node), setPod(p("a").Node("n1").Placement(`{"0":{"7":4}}`).Obj())},
			want: map[string]usage{"n1": {Used: []int64{0, 0}, Pending: 4}}},
		{name: "legacy index annotation", events: []event{setNode(node), setPod(p("a").Node("n1").Annotation(contract.AnnotationIndex, "1").Obj())},
			want: map[string]usage{"n1": {Used: []int64{0, 4}}}},
		{name: "terminating pod still holds", events: []event{setNode(node), setPod(p("a").Node("n1").Placement(`{"0":{"0":4}}`).Terminating().Obj())},
			want: map[string]usage{"n1": {Used: []int64{4, 0}}}},
		{name: "succeeded pod releases", events: []event{setNode(node),
			setPod(p("a").Node("n1").Placement(`{"0":{"0":4}}`).Obj()),
			setPod(p("a").Node("n1").Placement(`{"0":{"0":4}}`).Phase(v1.PodSucceeded).Obj())},
			want: map[string]usage{"n1": {Used: []int64{0, 0}}}},
		{name: "deleted pod releases", events: []event{setNode(node),
			setPod(p("a").Node("n1").Placement(`{"0":{"0":4}}`).Obj()), removePod(p("a").Obj())},
			want: map[string]usage{"n1": {Used: []int64{0, 0}}}},
		{name: "pods seen before their node count once it arrives", events: []event{
			setPod(p("a").Node("n1").Placement(`{"0":{"0":4}}`).Obj()), setNode(node)},
			want: map[string]usage{"n1": {Used: []int64{4, 0}}}},
		{name: "node capacity change", events: []event{setNode(node),
			setPod(p("a").Node("n1").Placement(`{"0":{"1":4}}`).Obj()), setNode(st.MakeNode("n1").GPUs(32).Obj())},
			want: map[string]usage{"n1": {Used: []int64{0}, Pending: 4}}},
		{name: "node deleted and back", events: []event{setNode(node),
			setPod(p("a").Node("n1").Placement(`{"0":{"1":4}}`).Obj()),
			func(_ *testing.T, c cache.Cache) { c.RemoveNode("n1") }, setNode(node)},
			want: map[string]usage{"n1": {Used: []int64{0, 4}}}},
		{name: "node deleted", events: []event{setNode(node), func(_ *testing.T, c cache.Cache) { c.RemoveNode("n1") }},
			want: map[string]usage{}},
		{name: "assume over capacity fails", events: []event{setNode(node),
			setPod(st.MakePod().Name("big").GPUMem(14).Node("n1").Placement(`{"0":{"0":14}}`).Obj()),
			assume(p("a").Obj(), "n1", `{"0":{"0":4}}`, cache.ErrDoesNotFit)},
			want: map[string]usage{"n1": {Used: []int64{14, 0}}}},
		{name: "assume on unhealthy GPU fails", events: []event{setNode(st.MakeNode("n1").GPUs(16, 16).Unhealthy(0).Obj()),
			assume(p("a").Obj(), "n1", `{"0":{"0":4}}`, cache.ErrDoesNotFit)},
			want: map[string]usage{"n1": {Used: []int64{0, 0}}}},
		{name: "assume on unknown node fails", events: []event{assume(p("a").Obj(), "nx", `{"0":{"0":4}}`, cache.ErrUnknownNode)},
			want: map[string]usage{}},
		{name: "assume twice on the same node keeps the first placement", events: []event{setNode(node),
			assume(p("a").Obj(), "n1", `{"0":{"0":4}}`, nil), assume(p("a").Obj(), "n1", `{"0":{"1":4}}`, nil)},
			want: map[string]usage{"n1": {Used: []int64{4, 0}}}},
		{name: "assume on another node fails", events: []event{setNode(node), setNode(st.MakeNode("n2").GPUs(16).Obj()),
			assume(p("a").Obj(), "n1", `{"0":{"0":4}}`, nil), assume(p("a").Obj(), "n2", `{"0":{"0":4}}`, cache.ErrPodOnOtherNode)},
			want: map[string]usage{"n1": {Used: []int64{4, 0}}, "n2": {Used: []int64{0}}}},
		{name: "even split without annotation", events: []event{setNode(st.MakeNode("n1").EvenSplit(32, 2).Obj()),
			setPod(p("a").Node("n1").Placement(`{"0":{"1":4}}`).Obj())},
			want: map[string]usage{"n1": {Used: []int64{0, 4}}}},
		{name: "multi-container with init container", events: []event{setNode(node),
			setPod(st.MakePod().Name("m").InitGPUMem(6).GPUMem(2).GPUMem(3).Node("n1").Placement(`{"init-0":{"0":6},"0":{"0":2},"1":{"1":3}}`).Obj())},
			want: map[string]usage{"n1": {Used: []int64{6, 3}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			c := cache.New(contract.DefaultNames(), logger)
			for _, ev := range tt.events {
				ev(t, c)
			}
			got := map[string]usage{}
			for _, n := range c.Nodes() {
				got[n.Name] = usageOf(n)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("usage (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestNodeInventory(t *testing.T) {
	tests := []struct {
		name string
		node *v1.Node
		want []placement.GPUInfo
		src  placement.InventorySource
	}{
		{name: "annotation with mixed sizes and health", node: st.MakeNode("n").GPUs(16, 32).Unhealthy(1).Model(1, "A100").Obj(),
			want: []placement.GPUInfo{
				{Index: 0, UUID: "GPU-n-0", Model: "Tesla T4", Capacity: 16, Healthy: true},
				{Index: 1, UUID: "GPU-n-1", Model: "A100", Capacity: 32}},
			src: placement.FromAnnotation},
		{name: "even split", node: st.MakeNode("n").EvenSplit(30, 2).Obj(),
			want: []placement.GPUInfo{{Index: 0, Capacity: 15, Healthy: true}, {Index: 1, Capacity: 15, Healthy: true}}, src: placement.FromEvenSplit},
		{name: "gpu-mem without count is one card", node: st.MakeNode("n").EvenSplit(8, 0).Obj(),
			want: []placement.GPUInfo{{Index: 0, Capacity: 8, Healthy: true}}, src: placement.FromEvenSplit},
		{name: "garbage annotation falls back", node: func() *v1.Node {
			n := st.MakeNode("n").EvenSplit(16, 1).Obj()
			n.Annotations[contract.DefaultNodeGPUsKey] = "not json"
			return n
		}(), want: []placement.GPUInfo{{Index: 0, Capacity: 16, Healthy: true}}, src: placement.FromEvenSplit},
		{name: "no GPUs", node: st.MakeNode("n").Obj(), src: placement.FromEvenSplit},
		{name: "a billion GPUs get none", node: st.MakeNode("n").EvenSplit(1e9, 1e9).Obj(), src: placement.FromEvenSplit},
		{name: "64 GPUs are kept", node: st.MakeNode("n").EvenSplit(64*16, 64).Obj(), want: evenCards(64, 16), src: placement.FromEvenSplit},
		{name: "cards larger than MaxUnitsPerGPU get none", node: st.MakeNode("n").EvenSplit(2*(contract.MaxUnitsPerGPU+1), 2).Obj(), src: placement.FromEvenSplit},
		{name: "an annotation of 65 GPUs falls back", node: func() *v1.Node {
			n := st.MakeNode("n").EvenSplit(16, 1).Obj()
			gpus := make([]contract.GPU, 65)
			for i := range gpus {
				gpus[i] = contract.GPU{Index: i, Units: 1, Healthy: true}
			}
			raw, err := json.Marshal(gpus)
			if err != nil {
				t.Fatal(err)
			}
			n.Annotations[contract.DefaultNodeGPUsKey] = string(raw)
			return n
		}(), want: []placement.GPUInfo{{Index: 0, Capacity: 16, Healthy: true}}, src: placement.FromEvenSplit},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			c := cache.New(contract.DefaultNames(), logger)
			c.SetNode(tt.node)
			got, ok := c.Node("n")
			if !ok {
				t.Fatal("node unknown")
			}
			if diff := cmp.Diff(tt.want, got.GPUs); diff != "" {
				t.Errorf("GPUs (-want,+got):\n%s", diff)
			}
			if got.Inventory != tt.src {
				t.Errorf("Inventory = %s, want %s", got.Inventory, tt.src)
			}
		})
	}
}

// evenCards are n healthy cards of units each, as an even split makes them.
func evenCards(n int, units int64) []placement.GPUInfo {
	out := make([]placement.GPUInfo, n)
	for i := range out {
		out[i] = placement.GPUInfo{Index: i, Capacity: units, Healthy: true}
	}
	return out
}

func TestSnapshotsAreImmutable(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	c := cache.New(contract.DefaultNames(), logger)
	c.SetNode(st.MakeNode("n1").GPUs(16).Obj())
	before, _ := c.Node("n1")
	c.SetPod(st.MakePod().Name("a").GPUMem(4).Node("n1").Placement(`{"0":{"0":4}}`).Obj())
	after, _ := c.Node("n1")
	if before.GPUs[0].Used != 0 || after.GPUs[0].Used != 4 {
		t.Errorf("used before/after = %d/%d, want 0/4", before.GPUs[0].Used, after.GPUs[0].Used)
	}
	without, _ := c.NodeWithout("n1", []types.UID{"uid-a"})
	if without.GPUs[0].Used != 0 || len(without.Pods) != 0 {
		t.Errorf("NodeWithout used = %d pods = %d, want 0, 0", without.GPUs[0].Used, len(without.Pods))
	}
}

// TestRebuild checks that a cache fed the same API objects again (an extender restart) equals
// the one that made the placements.
func TestRebuild(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	names := contract.DefaultNames()
	live := cache.New(names, logger)
	nodes := []*v1.Node{st.MakeNode("n1").GPUs(16, 16).Obj(), st.MakeNode("n2").GPUs(32).Obj()}
	for _, n := range nodes {
		live.SetNode(n)
	}
	var pods []*v1.Pod
	for i, place := range []struct{ node, alloc string }{{"n1", `{"0":{"0":4}}`}, {"n1", `{"0":{"1":4}}`}, {"n2", `{"0":{"0":4}}`}} {
		p := st.MakePod().Name(string(rune('a' + i))).GPUMem(4).Obj()
		req, _ := contract.ParseRequest(p, &names)
		a, _ := contract.DecodeAllocation(place.alloc)
		if _, err := live.AssumePod(p, &req, place.node, a); err != nil {
			t.Fatal(err)
		}
		p.Spec.NodeName = place.node
		p.Annotations[contract.AnnotationAllocation] = place.alloc
		live.SetPod(p)
		pods = append(pods, p)
	}
	rebuilt := cache.New(names, logger)
	for _, p := range pods { // pods before nodes: informers give no order guarantee
		rebuilt.SetPod(p)
	}
	for _, n := range nodes {
		rebuilt.SetNode(n)
	}
	if diff := cmp.Diff(live.Nodes(), rebuilt.Nodes(), cmp.AllowUnexported(placement.NodeInfo{}), cmpopts.IgnoreFields(placement.NodeInfo{}, "ID")); diff != "" {
		t.Errorf("rebuilt cache differs (-live,+rebuilt):\n%s", diff)
	}
}

// TestCompactViews checks the snapshot's compact per-card view (UsableFree) against
// its GPUs, inline (up to 8 cards) and beyond, and for a NodeInfo built by hand.
func TestCompactViews(t *testing.T) {
	for _, cards := range []int{3, 8, 10} {
		t.Run(fmt.Sprintf("cards=%d", cards), func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			c := cache.New(contract.DefaultNames(), logger)
			sizes := make([]int64, cards)
			for g := range sizes {
				sizes[g] = 16
			}
			c.SetNode(st.MakeNode("n").GPUs(sizes...).Unhealthy(1).Obj())
			for _, g := range []int{0, 1, cards - 1} {
				c.SetPod(st.MakePod().Name(fmt.Sprintf("p%d", g)).GPUMem(int64(5 + g)).Node("n").
					Placement(fmt.Sprintf(`{"0":{"%d":%d}}`, g, 5+g)).Obj())
			}
			snap, _ := c.Node("n")
			byHand := &placement.NodeInfo{Name: "n", GPUs: snap.GPUs}
			for _, n := range []*placement.NodeInfo{snap, byHand} {
				var wantFree []int64
				for _, g := range n.GPUs {
					free := g.Capacity - g.Used
					if !g.Healthy {
						free = -1
					}
					wantFree = append(wantFree, free)
				}
				if diff := cmp.Diff(wantFree, n.UsableFree()); diff != "" {
					t.Errorf("UsableFree (-want,+got):\n%s", diff)
				}
			}
			if got := snap.UsableFree()[cards-1]; got != 16-int64(5+cards-1) {
				t.Errorf("last card's free = %d, want %d", got, 16-(5+cards-1))
			}
		})
	}
}

// TestVisit: Visit hands each name's snapshot with its index, in order, nil for unknown names,
// across its lock batches.
func TestVisit(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	c := cache.New(contract.DefaultNames(), logger)
	var names []string
	for i := range 150 {
		name := fmt.Sprintf("n%03d", i)
		if i%7 != 3 { // every seventh name is not a node
			c.SetNode(st.MakeNode(name).GPUs(16).Obj())
		}
		names = append(names, name)
	}
	var got []string
	c.Visit(names, func(i int, node *placement.NodeInfo) {
		switch {
		case len(got) != i:
			t.Fatalf("visited index %d after %d visits", i, len(got))
		case node == nil:
			got = append(got, "")
		default:
			got = append(got, node.Name)
		}
	})
	var want []string
	for i, name := range names {
		if i%7 == 3 {
			name = ""
		}
		want = append(want, name)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Visit (-want,+got):\n%s", diff)
	}
}

// TestNodeIDs: every node the cache lists has an ID no other listed node has, kept while the
// node's snapshot changes; a deleted node's ID goes to the next new node, so IDs stay dense.
func TestNodeIDs(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	c := cache.New(contract.DefaultNames(), logger)
	for _, n := range []string{"a", "b", "c"} {
		c.SetNode(st.MakeNode(n).GPUs(16).Obj())
	}
	id := func(name string) int {
		t.Helper()
		n, ok := c.Node(name)
		if !ok {
			t.Fatalf("node %s unknown", name)
		}
		return n.ID
	}
	checkDistinct := func(want int) {
		t.Helper()
		seen := map[int]string{}
		for _, n := range c.Nodes() {
			if other, dup := seen[n.ID]; dup {
				t.Errorf("nodes %s and %s share ID %d", other, n.Name, n.ID)
			}
			if n.ID < 0 || n.ID >= want {
				t.Errorf("node %s has ID %d, want one below %d", n.Name, n.ID, want)
			}
			seen[n.ID] = n.Name
		}
	}
	checkDistinct(3)
	b := id("b")
	c.SetPod(st.MakePod().Name("p").GPUMem(4).Node("b").Placement(`{"0":{"0":4}}`).Obj())
	if got := id("b"); got != b {
		t.Errorf("node b's ID changed from %d to %d with its snapshot", b, got)
	}
	c.RemoveNode("b")
	c.SetNode(st.MakeNode("d").GPUs(16).Obj())
	if got := id("d"); got != b {
		t.Errorf("new node d has ID %d, want deleted node b's %d", got, b)
	}
	c.SetNode(st.MakeNode("b").GPUs(16).Obj()) // back, with its pod still recorded
	checkDistinct(4)
}
