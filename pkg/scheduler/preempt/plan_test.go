package preempt

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// fixedView is a View of fixed snapshots, each first changed by change (nil: as they are).
type fixedView struct {
	nodes  []*placement.NodeInfo
	change func(*placement.NodeInfo) *placement.NodeInfo
}

func (v fixedView) seen(n *placement.NodeInfo) *placement.NodeInfo {
	if n == nil || v.change == nil {
		return n
	}
	return v.change(n)
}

func (v fixedView) Node(name string) (*placement.NodeInfo, bool) {
	for _, n := range v.nodes {
		if n.Name == name {
			return v.seen(n), true
		}
	}
	return nil, false
}

func (v fixedView) Visit(names []string, fn func(int, *placement.NodeInfo)) {
	for i, name := range names {
		n, _ := v.Node(name)
		fn(i, n)
	}
}

func (v fixedView) VisitAll(fn func(*placement.NodeInfo)) {
	for _, n := range v.nodes {
		fn(v.seen(n))
	}
}

// usedOnCard0 is a View's change: 8 more units used on card 0, as another pod's hold.
func usedOnCard0(n *placement.NodeInfo) *placement.NodeInfo {
	cp := *n
	cp.SetGPUs(n.GPUs)
	cp.GPUs[0].Used += 8
	cp.Summarize()
	return &cp
}

// TestPlanThroughView: the planner sees the nodes as the View it is given shows them, never
// the cache behind it. On n1 (card 0: a 6 and b 4 of 16; card 1: c 12 of 16) an 8-unit pod
// evicts b alone, and with 8 more units held on card 0 it evicts c; a pod that fits a card as
// the view shows it preempts nothing (fitsNow), on the fullest such card, and a 5-unit pod
// that fits card 0 as the cache has it must evict c once card 0 is held.
func TestPlanThroughView(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	names := contract.DefaultNames()
	c := cache.New(names, logger)
	c.SetNode(st.MakeNode("n1").GPUs(16, 16).Obj())
	for _, p := range []struct {
		name        string
		card, units int64
	}{{"a", 0, 6}, {"b", 0, 4}, {"c", 1, 12}} {
		c.SetPod(st.MakePod().Name(p.name).GPUMem(p.units).Node("n1").Placement(fmt.Sprintf(`{"0":{"%d":%d}}`, p.card, p.units)).Obj())
	}
	preemptor := st.MakePod().Name("p").GPUMem(8).Obj()
	small, five := st.MakePod().Name("small").GPUMem(4).Obj(), st.MakePod().Name("five").GPUMem(5).Obj()
	p := New(Config{Enabled: true, Names: names})
	for _, tc := range []struct {
		name        string
		pod         *v1.Pod
		change      func(*placement.NodeInfo) *placement.NodeInfo
		wantFitsNow bool
		wantGPU     int
		wantVictims []string
	}{
		{name: "as the cache has it", pod: preemptor, wantGPU: 0, wantVictims: []string{"default/b"}},
		{name: "card 0 held for another pod", pod: preemptor, change: usedOnCard0, wantGPU: 1, wantVictims: []string{"default/c"}},
		{name: "fits now, on the fullest card", pod: small, wantFitsNow: true, wantGPU: 1},
		{name: "fits now on card 0 only", pod: five, wantFitsNow: true, wantGPU: 0},
		{name: "card 0 held: fits nowhere now", pod: five, change: usedOnCard0, wantGPU: 1, wantVictims: []string{"default/c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			view := fixedView{nodes: c.Nodes(), change: tc.change}
			req, err := contract.ParseRequest(tc.pod, &names)
			if err != nil {
				t.Fatal(err)
			}
			plan, ok := fitsNow(&req, []string{"n1"}, view)
			if ok != tc.wantFitsNow {
				t.Fatalf("fitsNow() = %+v, %v; want fits %v", plan, ok, tc.wantFitsNow)
			}
			if !ok {
				plan, ok = p.plan(&req, 100, []string{"n1"}, view, nil)
			}
			var victims []string
			for _, v := range plan.Victims {
				victims = append(victims, v.Key())
			}
			if diff := cmp.Diff([]any{true, "n1", tc.wantGPU, tc.wantVictims}, []any{ok, plan.Node, plan.GPU, victims}); diff != "" {
				t.Errorf("plan (-want,+got):\n%s", diff)
			}
		})
	}
}
