package sim

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/placement/policies"
)

// TestNumFeasibleNodesToFind checks kube-scheduler's formula at the sizes that matter.
func TestNumFeasibleNodesToFind(t *testing.T) {
	for _, tt := range []struct {
		nodes, percentage, want int
	}{
		{nodes: 50, want: 50},     // fewer than 100 nodes: all
		{nodes: 150, want: 100},   // 48 % of 150 is 72: at least 100
		{nodes: 1213, want: 497},  // 50 - 9 = 41 %
		{nodes: 5000, want: 500},  // 50 - 40 = 10 %
		{nodes: 10000, want: 500}, // at least 5 %
		{nodes: 1213, percentage: 100, want: 1213},
		{nodes: 1213, percentage: 1, want: 100}, // at least 100
	} {
		s := &sampler{percentage: tt.percentage}
		if got := s.numFeasibleNodesToFind(tt.nodes); got != tt.want {
			t.Errorf("%d nodes, %d %%: %d, want %d", tt.nodes, tt.percentage, got, tt.want)
		}
	}
}

// TestSamplerRotates: 200 nodes, the odd ones feasible, 100 wanted. The first cycle keeps the
// feasible nodes from the start until it has 100 (all of them: it reaches the end) and moves its
// start past every node it looked at; with a smaller percentage the next cycle starts where the
// previous stopped and wraps around.
func TestSamplerRotates(t *testing.T) {
	nodes := make([]*placement.NodeInfo, 200)
	for i := range nodes {
		nodes[i] = &placement.NodeInfo{Name: fmt.Sprint(i), ID: i}
	}
	odd := func(n *placement.NodeInfo) bool { return n.ID%2 == 1 }
	kept := func(out []*placement.NodeInfo) []int {
		var ids []int
		for _, n := range out {
			if n != nil {
				ids = append(ids, n.ID)
			}
		}
		return ids
	}
	s := &sampler{percentage: 100}
	out := s.sample(nodes, odd, nil)
	if got := kept(out); len(got) != 100 || got[0] != 1 || got[99] != 199 {
		t.Errorf("percentage 100 kept %v", got)
	}
	if s.next != 0 {
		t.Errorf("after looking at every node, next = %d, want 0", s.next)
	}
	if len(out) != len(nodes) {
		t.Errorf("sample has %d slots, want one per node (%d)", len(out), len(nodes))
	}

	// 300 nodes: 50 - 300/125 = 48 %, 144 nodes.
	nodes = append(nodes, make([]*placement.NodeInfo, 100)...)
	for i := 200; i < 300; i++ {
		nodes[i] = &placement.NodeInfo{Name: fmt.Sprint(i), ID: i}
	}
	s = &sampler{}
	got := kept(s.sample(nodes, odd, out))
	wantFirst := make([]int, 144)
	for i := range wantFirst {
		wantFirst[i] = 2*i + 1
	}
	if diff := cmp.Diff(wantFirst, got); diff != "" {
		t.Errorf("first cycle (-want,+got):\n%s", diff)
	}
	if s.next != 288 { // node 287 was the 144th feasible: 288 nodes looked at
		t.Errorf("next = %d, want 288", s.next)
	}
	// From 288: the 6 odd nodes 289-299, then 138 more from 1 to 275 (288 nodes looked at).
	got = kept(s.sample(nodes, odd, out))
	if len(got) != 144 || got[137] != 275 || got[138] != 289 {
		t.Errorf("second cycle kept %d nodes (%v), want 1-275 and 289-299", len(got), got)
	}
	if s.next != 276 {
		t.Errorf("next = %d, want (288+288) mod 300 = 276", s.next)
	}
}

// TestKubeFitsCountsGPUMemOverTheNode: kube-scheduler counts gpu-mem over the whole node, so a
// node whose free units are split over cards passes its filter even when no card alone fits.
func TestKubeFitsCountsGPUMemOverTheNode(t *testing.T) {
	n := &placement.NodeInfo{AllocatableMilliCPU: 4000, AllocatableMemory: 1 << 30,
		GPUs: []placement.GPUInfo{{Capacity: 1000, Used: 600}, {Capacity: 1000, Used: 600}}}
	res := placement.PodResources{MilliCPU: 1000, Memory: 1 << 20}
	for _, tt := range []struct {
		units int64
		want  bool
	}{{0, true}, {800, true}, {801, false}} {
		if got := kubeFits(n, res, tt.units); got != tt.want {
			t.Errorf("%d units: %v, want %v", tt.units, got, tt.want)
		}
	}
	if kubeFits(n, placement.PodResources{MilliCPU: 4001}, 0) {
		t.Error("a pod asking more CPU than the node has passed")
	}
}

// recorder is a learning policy that records what it is taught.
type recorder struct {
	placement.Policy
	learned []int64
}

func (r *recorder) Observe(req *gpumem.PodRequest, _ placement.PodResources) {
	r.learned = append(r.learned, req.TotalUnits())
}

func (r *recorder) Rebuild([]*placement.NodeInfo) {}

// TestLearnAtBind: by default every submitted pod is learned, the rejected one and the one
// without gpu-mem included (the paper's protocol); with LearnAtBind only the placed pod with
// gpu-mem, as the extender learns at bind. One card: of the 600- and 700-unit pods, the one
// submitted first is placed and the other no longer fits; the CPU pods (cloned to reach the
// target) fit.
func TestLearnAtBind(t *testing.T) {
	pods := []Pod{
		{Name: "a", MilliCPU: 500, MemoryMiB: 512, NumGPU: 1, GPUMilli: 600},
		{Name: "b", MilliCPU: 500, MemoryMiB: 512, NumGPU: 1, GPUMilli: 700},
		{Name: "cpu", MilliCPU: 500, MemoryMiB: 512},
	}
	for _, learnAtBind := range []bool{false, true} {
		t.Run(fmt.Sprintf("learnAtBind=%v", learnAtBind), func(t *testing.T) {
			base, err := policies.NewRegistry().New("binpack")
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{Policy: base}
			// Inflate 1.3: the three pods ask exactly 1.3 cards, so each is submitted once.
			res, err := (&Run{Nodes: synthNodes(1, 1), Pods: pods, Policy: rec, Inflate: 1.3, Seed: 1, LearnAtBind: learnAtBind}).Execute()
			if err != nil {
				t.Fatal(err)
			}
			order := Workload(pods, 1300, newRand(1))
			var want []int64
			for i, p := range order {
				placed := res.Nodes[i] != ""
				if !learnAtBind || (placed && p.NumGPU > 0) {
					want = append(want, p.GPURequest())
				}
			}
			if res.Placed != len(order)-1 {
				t.Fatalf("placed %d pods (%v for %v), want all but one GPU pod", res.Placed, res.Nodes, names(order))
			}
			if learnAtBind && len(want) != 1 {
				t.Fatalf("want %v: one placed pod with gpu-mem expected", want)
			}
			if diff := cmp.Diff(want, rec.learned); diff != "" {
				t.Errorf("learned (-want,+got):\n%s", diff)
			}
		})
	}
}

// syncRecorder is a policy that keeps per-node state and records the nodes it is handed.
type syncRecorder struct {
	placement.Policy
	synced [][]string
}

func (r *syncRecorder) SyncNodes(nodes []*placement.NodeInfo) {
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	r.synced = append(r.synced, names)
}

// TestSyncNodes: with SyncNodes the policy is handed every node once before the first pod, as
// the extender's policy sync does; without it, never.
func TestSyncNodes(t *testing.T) {
	for _, sync := range []bool{false, true} {
		base, err := policies.NewRegistry().New("binpack")
		if err != nil {
			t.Fatal(err)
		}
		rec := &syncRecorder{Policy: base}
		if _, err := (&Run{Nodes: synthNodes(3, 1), Pods: sharingPods(2, 500), Policy: rec, Inflate: 1, Seed: 1, SyncNodes: sync}).Execute(); err != nil {
			t.Fatal(err)
		}
		var want [][]string
		if sync {
			want = [][]string{{"node-00", "node-01", "node-02"}}
		}
		if diff := cmp.Diff(want, rec.synced, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Errorf("SyncNodes=%v: synced (-want,+got):\n%s", sync, diff)
		}
	}
}
