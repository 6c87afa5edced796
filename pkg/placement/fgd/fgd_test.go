package fgd_test

// The tests of the fgd policy in the shape of placement's policy tests (placement/binpack_test.go,
// the file a new policy's author copies): on hand-built nodes, the order in which a Decision
// under the policy puts the nodes a pod fits, the card it plans on each and the score, worked
// out by hand from FGD's formula, score = floor(100 / (1 + e^(delta/1000))) for a change delta
// in fragmentation (milli-GPU; the nodes' cards hold 1000 units, so a unit is a milli-GPU).

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/placement/fgd"
)

// cards is the summarised snapshot of node name (ID id) with one T4 card of 1000 units per
// free value and 64 CPUs free.
func cards(name string, id int, free ...int64) *placement.NodeInfo {
	n := &placement.NodeInfo{Name: name, ID: id, AllocatableMilliCPU: 64000}
	for i, f := range free {
		n.GPUs = append(n.GPUs, placement.GPUInfo{Index: i, Model: "Tesla T4", Capacity: 1000, Used: 1000 - f, Healthy: true})
	}
	n.Summarize()
	return n
}

// withCPU is n with only cpu millicores allocatable.
func withCPU(n *placement.NodeInfo, cpu int64) *placement.NodeInfo {
	n.AllocatableMilliCPU = cpu
	return n
}

// oneCard is a pod of units on one card.
func oneCard(units int64) *gpumem.PodRequest {
	return &gpumem.PodRequest{Containers: []gpumem.ContainerRequest{{Key: "0", Units: units, GPUs: 1}}}
}

// halves is the workload both FGD policies are taught in these tests: pods of half a card and
// one CPU. A card with less than 500 units free is then a fragment, and so is every idle unit
// of a node whose CPU left is under one CPU.
var halves = placement.Demand{Req: *oneCard(500), Res: placement.PodResources{MilliCPU: 1000}}

// order lists the nodes req fits under policy, best score first (ties in the nodes' order),
// each as "name[cards]=score".
func order(policy placement.Policy, req *gpumem.PodRequest, res placement.PodResources, nodes ...*placement.NodeInfo) []string {
	d := placement.NewDecision(policy, req, res)
	type scored struct {
		s     float64
		label string
	}
	var out []scored
	for _, n := range nodes {
		plan := &placement.Plan{}
		s, ok := d.Score(n, plan)
		if !ok {
			continue
		}
		at := len(out)
		for at > 0 && out[at-1].s < s {
			at--
		}
		out = append(out[:at], append([]scored{{s, fmt.Sprintf("%s%v=%g", n.Name, plan.UsedGPUs(), s)}}, out[at:]...)...)
	}
	labels := make([]string, len(out))
	for i, o := range out {
		labels[i] = o.label
	}
	return labels
}

func TestFGDOrder(t *testing.T) {
	tests := []struct {
		name     string
		foresee  bool // tell the policy the workload of halves
		nodes    []*placement.NodeInfo
		req      *gpumem.PodRequest
		milliCPU int64
		want     []string
	}{
		// f: 1000 → 500 still fits a half: delta 0, score 50. b: card 0 would leave 100 (47),
		// card 1 leaves 500 (50). g: 600 → 100, a fragment: delta 100, score 47. e: 700 → 200:
		// 45. x: 400 free, the pod does not fit.
		{name: "the least fragmentation, not the fullest nor the emptiest", foresee: true,
			nodes: []*placement.NodeInfo{cards("e", 0, 700), cards("g", 1, 600), cards("f", 2, 1000), cards("b", 3, 600, 1000), cards("x", 4, 400)},
			req:   oneCard(500), milliCPU: 1000,
			want: []string{"f[0]=50", "b[1]=50", "g[0]=47", "e[0]=45"}},
		// h: card 1's 300 are a fragment; filling it: delta -300, score 57 (card 0: 50).
		{name: "filling a fragment scores above 50", foresee: true,
			nodes: []*placement.NodeInfo{cards("f", 0, 1000), cards("h", 1, 1000, 300)},
			req:   oneCard(300), milliCPU: 1000,
			want: []string{"h[1]=57", "f[0]=50"}},
		// k: the pod leaves 500 millicores, too few for a half: its 500 idle units become a
		// fragment, delta 500, score 37.
		{name: "a node whose CPU the pod exhausts", foresee: true,
			nodes: []*placement.NodeInfo{withCPU(cards("k", 0, 1000), 1500), cards("f", 1, 1000)},
			req:   oneCard(500), milliCPU: 1000,
			want: []string{"f[0]=50", "k[0]=37"}},
		// k leaves 2000 millicores for 1500 idle units, fewer than halves ask per unit (2): fgd
		// does not look ahead (fgd-online does).
		{name: "it does not weigh the CPU it leaves per idle unit", foresee: true,
			nodes: []*placement.NodeInfo{withCPU(cards("k", 0, 1000, 1000), 4000), cards("f", 1, 1000)},
			req:   oneCard(500), milliCPU: 2000,
			want: []string{"k[0]=50", "f[0]=50"}},
		// Without a workload nothing is a fragment: every delta is 0, every score 50, and the
		// first card is planned.
		{name: "untaught, it cannot tell nodes or cards apart",
			nodes: []*placement.NodeInfo{cards("e", 0, 700), cards("b", 1, 600, 1000), cards("f", 2, 1000)},
			req:   oneCard(500), milliCPU: 1000,
			want: []string{"e[0]=50", "b[0]=50", "f[0]=50"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fgd.New()
			if p.Name() != "fgd" {
				t.Errorf("Name() = %q, want fgd", p.Name())
			}
			if tt.foresee {
				p.Foresee([]placement.Demand{halves})
			}
			p.Observe(oneCard(100), placement.PodResources{MilliCPU: 100}) // fgd does not learn
			got := order(p, tt.req, placement.PodResources{MilliCPU: tt.milliCPU}, tt.nodes...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("order (-want,+got):\n%s", diff)
			}
		})
	}
}
