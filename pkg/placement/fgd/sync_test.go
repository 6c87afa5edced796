package fgd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// TestSyncNodesForgetsDeletedNodes: after SyncNodes, a fragmentation policy's model supply
// counts exactly the nodes the cache has, scored or not: deleted nodes no longer; and every
// node's view is prepared.
func TestSyncNodesForgetsDeletedNodes(t *testing.T) {
	for _, name := range []string{"fgd", "fgd-online"} {
		t.Run(name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			c := cache.New(contract.DefaultNames(), logger)
			c.SetNode(st.MakeNode("a").GPUs(80, 80).Model(0, "A100").Model(1, "A100").Obj())
			c.SetNode(st.MakeNode("b").GPUs(16).Obj())
			c.SetNode(st.MakeNode("c").GPUs(16, 16).Obj())
			policy := newTestPolicy(t, name, &Distribution{}, nil)
			views := viewsOf(t, policy)
			req := &contract.PodRequest{Containers: []contract.ContainerRequest{{Key: "0", Units: 4, GPUs: 1}}}
			d := placement.NewDecision(policy, req, placement.PodResources{})
			for _, n := range c.Nodes() {
				d.Score(n, &placement.Plan{})
			}
			views.mu.Lock()
			if got := len(views.supply.byNode); got != 3 {
				t.Errorf("supply after prioritize counts %d nodes, want 3", got)
			}
			views.mu.Unlock()
			c.RemoveNode("b")
			c.SetNode(st.MakeNode("d").GPUs(32).Model(0, "A100").Obj()) // never scored
			policy.(placement.NodeSyncer).SyncNodes(c.Nodes())
			for _, n := range c.Nodes() { // every node's view is ready, the unscored d's too
				if e := views.table.slot(n.ID).Load(); e == nil || e.view.node != n {
					t.Errorf("after SyncNodes node %s has no current view", n.Name)
				}
			}
			views.mu.Lock()
			defer views.mu.Unlock()
			want := map[string]int64{"A100": 80 + 80 + 32, "Tesla T4": 16 + 16}
			if diff := cmp.Diff(want, nonZero(views.supply.byModel)); diff != "" {
				t.Errorf("supply by model (-want,+got):\n%s", diff)
			}
			if views.supply.total != 224 {
				t.Errorf("supply total %d, want 224", views.supply.total)
			}
			if _, ok := views.supply.byNode["b"]; ok {
				t.Error("supply still holds deleted node b")
			}
		})
	}
}

// viewsOf is a fragmentation policy's per-node views.
func viewsOf(t *testing.T, p placement.Policy) *fragViews {
	t.Helper()
	switch p := p.(type) {
	case *FGD:
		return p.views
	case *Online:
		return p.views
	}
	t.Fatalf("%T keeps no fragmentation views", p)
	return nil
}

// nonZero is m without its zero entries (a model whose last node went).
func nonZero(m map[string]int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		if v != 0 {
			out[k] = v
		}
	}
	return out
}
