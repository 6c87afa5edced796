package sim

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/placement/policies"
)

// synthNodes is n nodes with cards GPUs each, 8 CPUs and 16 GiB.
func synthNodes(n, cards int) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = Node{Name: fmt.Sprintf("node-%02d", i), MilliCPU: 8000, MemoryMiB: 16384, GPUs: cards, Model: "T4"}
	}
	return out
}

func sharingPods(n int, milli int64) []Pod {
	out := make([]Pod, n)
	for i := range out {
		out[i] = Pod{Name: fmt.Sprintf("pod-%03d", i), MilliCPU: 500, MemoryMiB: 512, NumGPU: 1, GPUMilli: milli}
	}
	return out
}

func execute(t *testing.T, policy string, nodes []Node, pods []Pod, inflate float64, seed uint64) *Result {
	t.Helper()
	p, err := policies.NewRegistry().New(policy)
	if err != nil {
		t.Fatal(err)
	}
	res, err := (&Run{Nodes: nodes, Pods: pods, Policy: p, Inflate: inflate, Seed: seed}).Execute()
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestTilingTrace: 16 half-card pods and one pod too big for any node's CPU on 4 nodes of 2
// cards. The half-card pods tile the cards exactly, so every policy places all of them and the
// allocation follows the arrivals to 100%.
func TestTilingTrace(t *testing.T) {
	pods := append(sharingPods(16, 500), Pod{Name: "cpu-hog", MilliCPU: 100000, MemoryMiB: 1})
	type outcome struct {
		Submitted, Placed int
		At50, At100       float64
	}
	want := outcome{Submitted: 17, Placed: 16, At50: 50, At100: 100}
	for _, policy := range policies.NewRegistry().Names() {
		t.Run(policy, func(t *testing.T) {
			res := execute(t, policy, synthNodes(4, 2), pods, 1, 7)
			got := outcome{Submitted: res.Submitted, Placed: res.Placed, At50: res.AllocAt(50), At100: res.AllocAt(100)}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("outcome (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestPackingMatters: two single-card nodes, two half-card pods and one whole-card pod. Best-fit
// stacks the halves and places everything; spread separates them, so when the whole-card pod
// comes last it is rejected and allocation ends at 50%.
func TestPackingMatters(t *testing.T) {
	pods := append(sharingPods(2, 500), Pod{Name: "whole", MilliCPU: 500, MemoryMiB: 512, NumGPU: 1, GPUMilli: 1000})
	nodes := synthNodes(2, 1)
	for seed := uint64(1); seed <= 6; seed++ {
		order := Workload(pods, 2000, newRand(seed))
		wholeLast := order[len(order)-1].Name == "whole"
		tests := []struct {
			name   string
			policy string
			want   float64
		}{
			{"binpack", "binpack", 100},
			{"fgd-online", policies.Default, 100},
			{"spread", "spread", map[bool]float64{true: 50, false: 100}[wholeLast]},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/seed%d", tt.name, seed), func(t *testing.T) {
				res := execute(t, tt.policy, nodes, pods, 1, seed)
				if got := res.AllocAt(100); got != tt.want {
					t.Errorf("alloc@100 = %v, want %v (order %v)", got, tt.want, names(order))
				}
			})
		}
	}
}

func names(pods []Pod) []string {
	out := make([]string, len(pods))
	for i := range pods {
		out[i] = pods[i].Name
	}
	return out
}
