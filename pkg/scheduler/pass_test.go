package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// heldFor is an overlay with one hold: 8 units of card 0 held for the pod of holder, which
// every other pod sees as used (preempt.Holds.View, whose own tests cover the holds' rules).
type heldFor struct{ holder types.UID }

func (heldFor) Empty() bool { return false }

func (h heldFor) View(node *placement.NodeInfo, pod types.UID) *placement.NodeInfo {
	if node == nil || pod == h.holder {
		return node
	}
	cp := *node
	cp.SetGPUs(node.GPUs)
	cp.GPUs[0].Used += 8
	cp.Summarize()
	return &cp
}

// TestNodeView: a verb whose entry says holds apply sees the holds overlaid for the pod it
// places, through Node, Visit and VisitAll alike; nodes the cache lacks stay nil.
func TestNodeView(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	c := cache.New(contract.DefaultNames(), logger)
	c.SetNode(st.MakeNode("n1").GPUs(16).Obj())
	ext := NewExtender(c, nil, placement.Binpack{}, contract.DefaultNames())
	ext.holds = heldFor{holder: "uid-h"}
	tests := []struct {
		name string
		view nodeView
		want []int64 // free units of n1's card as seen, then -1 for the unknown node
	}{
		{name: "filter, another pod", view: ext.nodeView(verbFilter, "uid-other"), want: []int64{8, -1}},
		{name: "prioritize, another pod", view: ext.nodeView(verbPrioritize, "uid-other"), want: []int64{8, -1}},
		{name: "bind, another pod", view: ext.nodeView(verbBind, "uid-other"), want: []int64{8, -1}},
		{name: "preempt, another pod", view: ext.nodeView(verbPreempt, "uid-other"), want: []int64{8, -1}},
		{name: "filter, the holder", view: ext.nodeView(verbFilter, "uid-h"), want: []int64{16, -1}},
		{name: "without holds", view: nodeView{cache: c, pod: types.UID("uid-other")}, want: []int64{16, -1}},
	}
	free := func(n *placement.NodeInfo) int64 {
		if n == nil {
			return -1
		}
		return n.UsableFree()[0]
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var visited []int64
			tc.view.Visit([]string{"n1", "ghost"}, func(_ int, n *placement.NodeInfo) { visited = append(visited, free(n)) })
			if diff := cmp.Diff(tc.want, visited); diff != "" {
				t.Errorf("Visit (-want,+got):\n%s", diff)
			}
			var all []int64
			tc.view.VisitAll(func(n *placement.NodeInfo) { all = append(all, free(n)) })
			if diff := cmp.Diff(tc.want[:1], all); diff != "" {
				t.Errorf("VisitAll (-want,+got):\n%s", diff)
			}
			n1, ok1 := tc.view.Node("n1")
			ghost, ok2 := tc.view.Node("ghost")
			if diff := cmp.Diff([]any{tc.want[0], true, tc.want[1], false}, []any{free(n1), ok1, free(ghost), ok2}); diff != "" {
				t.Errorf("Node (-want,+got):\n%s", diff)
			}
		})
	}
	if n, _ := c.Node("n1"); n.UsableFree()[0] != 16 {
		t.Errorf("a view changed the cache's snapshot: %d free", n.UsableFree()[0])
	}
}
