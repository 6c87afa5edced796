package placement_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// Link rows of 4-card nodes with one NVLinked pair and two PCIe cards (PHB between them, SYS to
// the pair).
var (
	pairLast = []string{
		"X PHB SYS SYS",
		"PHB X SYS SYS",
		"SYS SYS X NV4",
		"SYS SYS NV4 X",
	}
	pairFirst = []string{
		"X NV4 SYS SYS",
		"NV4 X SYS SYS",
		"SYS SYS X PHB",
		"SYS SYS PHB X",
	}
	// asymmetric says card 0 is NVLinked to card 1, and card 1 that it is not.
	asymmetric = []string{
		"X SYS SYS NV4",
		"PHB X SYS SYS",
		"SYS SYS X NV4",
		"SYS SYS NV4 X",
	}
)

// TestPlanPodTopology: on a node with topology, a container on several cards gets the
// best-connected set that fits, and a one-card container spares it where the policy cannot
// tell the cards apart; a node without topology, or with an invalid one, is placed on as before.
func TestPlanPodTopology(t *testing.T) {
	all := []string{"binpack", "spread", "fgd", "fgd-online"}
	node := func(links []string) *v1.Node { return st.MakeNode("n").GPUs(16, 16, 16, 16).Links(links...).Obj() }
	twoCards := func(units int64) *v1.Pod {
		return st.MakePod().GPUMem(units).Annotation(contract.DefaultGPUsPerContainer, "2").Obj()
	}
	halfOfCard0 := []*v1.Pod{st.MakePod().Name("x").GPUMem(8).Node("n").Placement(`{"0":{"0":8}}`).Obj()}
	tests := []struct {
		name     string
		node     *v1.Node
		bound    []*v1.Pod
		pod      *v1.Pod
		policies []string
		topology *placement.Topology // replaces the snapshot's, when set
		want     contract.Allocation
	}{
		{name: "two whole cards get the NVLinked pair", node: node(pairLast), pod: twoCards(32), policies: all,
			want: contract.Allocation{"0": {2: 16, 3: 16}}},
		{name: "two half cards get the NVLinked pair", node: node(pairLast), pod: twoCards(16), policies: all,
			want: contract.Allocation{"0": {2: 8, 3: 8}}},
		{name: "a one-card pod spares the pair", node: node(pairFirst), pod: st.MakePod().GPUMem(8).Obj(), policies: all,
			want: contract.Allocation{"0": {2: 8}}},
		{name: "a whole-card pod spares the pair", node: node(pairFirst), pod: st.MakePod().GPUMem(16).Obj(), policies: all,
			want: contract.Allocation{"0": {2: 16}}},
		{name: "the policy's preference stands", node: node(pairFirst), bound: halfOfCard0, pod: st.MakePod().GPUMem(8).Obj(),
			policies: []string{"binpack"}, want: contract.Allocation{"0": {0: 8}}},
		{name: "a broken pair is the least connected", node: node(pairFirst), bound: halfOfCard0, pod: st.MakePod().GPUMem(8).Obj(),
			policies: []string{"spread"}, want: contract.Allocation{"0": {1: 8}}},
		{name: "without topology: the first cards", node: node(nil), pod: twoCards(32), policies: all,
			want: contract.Allocation{"0": {0: 16, 1: 16}}},
		{name: "without topology: the first card", node: node(nil), pod: st.MakePod().GPUMem(8).Obj(), policies: all,
			want: contract.Allocation{"0": {0: 8}}},
		{name: "an invalid topology is ignored", node: node(asymmetric), pod: twoCards(32), policies: all,
			want: contract.Allocation{"0": {0: 16, 1: 16}}},
		{name: "a topology of other cards is ignored", node: node(nil), pod: twoCards(32), policies: all,
			topology: placement.NewTopology(3, func(i, j int) int { return 100 * (i + j) }),
			want:     contract.Allocation{"0": {0: 16, 1: 16}}},
	}
	for _, tt := range tests {
		for _, policy := range tt.policies {
			t.Run(tt.name+"/"+policy, func(t *testing.T) {
				n := nodeWith(t, tt.node, tt.bound...)
				if tt.topology != nil {
					other := *n // snapshots are immutable: change a copy
					other.Topology = tt.topology
					n = &other
				}
				req := mustRequest(t, tt.pod)
				plan, ok := placement.PlanPod(n, req, scorer(t, policy))
				if !ok {
					t.Fatalf("PlanPod() found no fit: %v", placement.Explain(n, req, "GiB"))
				}
				if diff := cmp.Diff(tt.want, plan.Allocation(n, req)); diff != "" {
					t.Errorf("allocation (-want,+got):\n%s", diff)
				}
			})
		}
	}
}
