package sim

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement/policies"
)

// TestSyntheticLinks: each kind of synthetic node, as its annotation publishes it and the
// contract reads it back.
func TestSyntheticLinks(t *testing.T) {
	tests := []struct {
		name  string
		index int
		cards int
		want  []string // GPU.Links per card; nil: none
	}{
		{name: "NVSwitch box", index: 0, cards: 4, want: []string{
			"X NV12 NV12 NV12", "NV12 X NV12 NV12", "NV12 NV12 X NV12", "NV12 NV12 NV12 X"}},
		{name: "PCIe box of 4+4", index: 1, cards: 8, want: []string{
			"X PIX NODE NODE SYS SYS SYS SYS",
			"PIX X NODE NODE SYS SYS SYS SYS",
			"NODE NODE X PIX SYS SYS SYS SYS",
			"NODE NODE PIX X SYS SYS SYS SYS",
			"SYS SYS SYS SYS X PIX NODE NODE",
			"SYS SYS SYS SYS PIX X NODE NODE",
			"SYS SYS SYS SYS NODE NODE X PIX",
			"SYS SYS SYS SYS NODE NODE PIX X"}},
		{name: "NVLinked pairs", index: 5, cards: 4, want: []string{
			"X NV4 SYS SYS", "NV4 X SYS SYS", "SYS SYS X NV4", "SYS SYS NV4 X"}},
		{name: "NVLinked pairs of 8", index: 2, cards: 8, want: []string{
			"X NV4 PHB PHB SYS SYS SYS SYS",
			"NV4 X PHB PHB SYS SYS SYS SYS",
			"PHB PHB X NV4 SYS SYS SYS SYS",
			"PHB PHB NV4 X SYS SYS SYS SYS",
			"SYS SYS SYS SYS X NV4 PHB PHB",
			"SYS SYS SYS SYS NV4 X PHB PHB",
			"SYS SYS SYS SYS PHB PHB X NV4",
			"SYS SYS SYS SYS PHB PHB NV4 X"}},
		{name: "2-card PCIe box: one card per socket", index: 4, cards: 2, want: []string{"X SYS", "SYS X"}},
		{name: "one card has no links", index: 0, cards: 1},
	}
	names := contract.DefaultNames()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := Node{Name: "n", MilliCPU: 1000, MemoryMiB: 1024, GPUs: tt.cards, Model: "T4"}
			n.Links = SyntheticLinks(tt.index, &n)
			obj, err := NodeObject(&n, &names)
			if err != nil {
				t.Fatal(err)
			}
			gpus, err := contract.DecodeGPUs(obj.Annotations[names.NodeGPUsAnnotation])
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, g := range gpus {
				if g.Links != "" {
					got = append(got, g.Links)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("links (-want,+got):\n%s", diff)
			}
			if _, err := contract.TopologyOf(gpus); err != nil {
				t.Errorf("TopologyOf() = %v", err)
			}
		})
	}
}

// TestTopologyKeepsPlacement: on nodes with synthetic topologies, placement that sees them puts
// every pod on the node it would choose without them (the cards it spares or joins are ones the
// policy cannot tell apart), and every multi-card container on its node's best-connected set.
func TestTopologyKeepsPlacement(t *testing.T) {
	nodes := WithSyntheticTopology(synthNodes(6, 4))
	var pods []Pod
	for i, shape := range [][2]int64{{1, 300}, {1, 1000}, {2, 1000}, {1, 650}, {2, 1000}, {1, 1000}, {4, 1000}, {1, 470}} {
		pods = append(pods, Pod{Name: "p" + string(rune('a'+i)), MilliCPU: 500, MemoryMiB: 512, NumGPU: shape[0], GPUMilli: shape[1]})
	}
	for _, policy := range []string{"binpack", "spread", policies.Default} {
		t.Run(policy, func(t *testing.T) {
			run := func(hide bool) *Result {
				p, err := policies.NewRegistry().New(policy)
				if err != nil {
					t.Fatal(err)
				}
				res, err := (&Run{Nodes: nodes, Pods: pods, Policy: p, Inflate: 1.3, Seed: 7, HideLinks: hide}).Execute()
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
			blind, seen := run(true), run(false)
			if diff := cmp.Diff(blind.Nodes, seen.Nodes); diff != "" {
				t.Errorf("nodes with topology seen (-unseen,+seen):\n%s", diff)
			}
			if seen.MultiCard == 0 || seen.OnBestSet != seen.MultiCard || seen.OnBestFreeSet != seen.MultiCard {
				t.Errorf("%d multi-card containers, %d on their node's best set, %d on the best free one; want all", seen.MultiCard, seen.OnBestSet, seen.OnBestFreeSet)
			}
			if blind.MultiCard != seen.MultiCard || blind.OnBestSet > seen.OnBestSet {
				t.Errorf("unseen topology: %d multi-card containers, %d on their best set; seen: %d, %d", blind.MultiCard, blind.OnBestSet, seen.MultiCard, seen.OnBestSet)
			}
		})
	}
}
