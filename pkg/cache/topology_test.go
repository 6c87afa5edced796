package cache_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
)

// TestNodeTopology: the cache carries a node's link matrix into its snapshots as pair scores,
// one pointer shared by the node's snapshots; a node without links has none, and one with an
// invalid matrix has none either, keeps its cards and logs why.
func TestNodeTopology(t *testing.T) {
	pairs := []string{"X NV4 SYS SYS", "NV4 X SYS SYS", "SYS SYS X PIX", "SYS SYS PIX X"}
	newer := st.MakeNode("n").GPUs(16, 16).Links("X NV2", "NV2 X").Obj()
	if err := func() error { // a plugin of a later grammar
		gpus, err := contract.DecodeGPUs(newer.Annotations[contract.DefaultNodeGPUsKey])
		if err != nil {
			return err
		}
		gpus[0].TopologyVersion = contract.TopologyVersion + 1
		raw, err := contract.EncodeGPUs(gpus)
		newer.Annotations[contract.DefaultNodeGPUsKey] = raw
		return err
	}(); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		node    *v1.Node
		want    [][]int // PairScore of every two cards; nil: no topology
		wantLog string  // in the cache's log
	}{
		{name: "NVLinked pair and a PCIe switch", node: st.MakeNode("n").GPUs(16, 16, 16, 16).Links(pairs...).Obj(),
			want: [][]int{{0, 400, 10, 10}, {400, 0, 10, 10}, {10, 10, 0, 50}, {10, 10, 50, 0}}},
		{name: "NVSwitch pair", node: st.MakeNode("n").GPUs(80, 80).Links("X NV18", "NV18 X").Obj(),
			want: [][]int{{0, 1800}, {1800, 0}}},
		{name: "unknown link token counts as SYS", node: st.MakeNode("n").GPUs(16, 16).Links("X C2C", "C2C X").Obj(),
			want: [][]int{{0, 10}, {10, 0}}},
		{name: "no links", node: st.MakeNode("n").GPUs(16, 16).Obj()},
		{name: "even split", node: st.MakeNode("n").EvenSplit(32, 2).Obj()},
		{name: "asymmetric links are ignored", node: st.MakeNode("n").GPUs(16, 16).Links("X NV4", "PIX X").Obj(),
			wantLog: "Node's GPU topology ignored"},
		{name: "a row too short is ignored", node: st.MakeNode("n").GPUs(16, 16, 16).Links("X NV4 SYS", "NV4 X", "SYS SYS X").Obj(),
			wantLog: "Node's GPU topology ignored"},
		{name: "one card without links is ignored", node: st.MakeNode("n").GPUs(16, 16).Links("X NV4").Obj(),
			wantLog: "Node's GPU topology ignored"},
		{name: "a newer grammar is ignored", node: newer, wantLog: "topology version 2 is newer than 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
			c := cache.New(contract.DefaultNames(), logger)
			c.SetNode(tt.node)
			got, ok := c.Node("n")
			if !ok || len(got.GPUs) == 0 {
				t.Fatalf("node unknown or without cards: %v", got)
			}
			var scores [][]int
			if topo := got.Topology; topo != nil {
				scores = make([][]int, topo.Cards())
				for i := range scores {
					for j := range topo.Cards() {
						scores[i] = append(scores[i], topo.PairScore(i, j))
					}
				}
			}
			if diff := cmp.Diff(tt.want, scores); diff != "" {
				t.Errorf("pair scores (-want,+got):\n%s", diff)
			}
			logs := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
			if tt.wantLog != "" && !strings.Contains(logs, tt.wantLog) {
				t.Errorf("log %q does not say %q", logs, tt.wantLog)
			}
		})
	}
}

// TestTopologyShared: a node's snapshots share its topology, also across updates of the node
// that leave the links as they were; new links replace it, and removing them drops it.
func TestTopologyShared(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	c := cache.New(contract.DefaultNames(), logger)
	node := st.MakeNode("n").GPUs(16, 16).Links("X NV4", "NV4 X")
	c.SetNode(node.Obj())
	first, _ := c.Node("n")
	c.SetPod(st.MakePod().Name("p").GPUMem(4).Node("n").Placement(`{"0":{"0":4}}`).Obj())
	c.SetNode(node.Label("updated", "yes").Obj())
	second, _ := c.Node("n")
	if first == second || first.Topology == nil || second.Topology != first.Topology {
		t.Fatalf("snapshots %p and %p hold topologies %p and %p, want two snapshots sharing one", first, second, first.Topology, second.Topology)
	}
	c.SetNode(node.Links("X PIX", "PIX X").Obj())
	third, _ := c.Node("n")
	if third.Topology == first.Topology || third.Topology.PairScore(0, 1) != 50 {
		t.Errorf("new links kept the old topology (PairScore %d)", third.Topology.PairScore(0, 1))
	}
	c.SetNode(st.MakeNode("n").GPUs(16, 16).Obj())
	if fourth, _ := c.Node("n"); fourth.Topology != nil {
		t.Error("links removed, the topology stayed")
	}
}
