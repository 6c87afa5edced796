package placement_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/placement/policies"
)

// nodeWith returns the snapshot of node after the bound pods.
func nodeWith(t testing.TB, node *v1.Node, pods ...*v1.Pod) *placement.NodeInfo {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	c := cache.New(contract.DefaultNames(), logger)
	c.SetNode(node)
	for _, p := range pods {
		c.SetPod(p)
	}
	n, _ := c.Node(node.Name)
	return n
}

func mustRequest(t testing.TB, p *v1.Pod) *contract.PodRequest {
	t.Helper()
	names := contract.DefaultNames()
	req, err := contract.ParseRequest(p, &names)
	if err != nil {
		t.Fatal(err)
	}
	return &req
}

func scorer(t *testing.T, name string) placement.Scorer {
	t.Helper()
	p, err := policies.NewRegistry().New(name)
	if err != nil {
		t.Fatal(err)
	}
	return p.ForPod(placement.PodResources{})
}

func TestPlanPod(t *testing.T) {
	used := func(name, alloc string, units int64) *v1.Pod {
		return st.MakePod().Name(name).GPUMem(units).Node("n").Placement(alloc).Obj()
	}
	// Cards 0..2 of 16 with 10, 4 and 0 units used.
	busy := []*v1.Pod{used("x", `{"0":{"0":10}}`, 10), used("y", `{"0":{"1":4}}`, 4)}
	tests := []struct {
		name                    string
		node                    *v1.Node
		bound                   []*v1.Pod
		pod                     *v1.Pod
		policy                  string
		want                    contract.Allocation
		wantReason, wantSummary string
	}{
		{name: "binpack takes the tightest card", node: st.MakeNode("n").GPUs(16, 16, 16).Obj(), bound: busy,
			pod: st.MakePod().GPUMem(4).Obj(), policy: "binpack", want: contract.Allocation{"0": {0: 4}}},
		{name: "binpack skips a card too full", node: st.MakeNode("n").GPUs(16, 16, 16).Obj(), bound: busy,
			pod: st.MakePod().GPUMem(8).Obj(), policy: "binpack", want: contract.Allocation{"0": {1: 8}}},
		{name: "spread takes the emptiest card", node: st.MakeNode("n").GPUs(16, 16, 16).Obj(), bound: busy,
			pod: st.MakePod().GPUMem(4).Obj(), policy: "spread", want: contract.Allocation{"0": {2: 4}}},
		{name: "mixed sizes", node: st.MakeNode("n").GPUs(8, 32).Obj(),
			pod: st.MakePod().GPUMem(12).Obj(), policy: "binpack", want: contract.Allocation{"0": {1: 12}}},
		{name: "unhealthy card is never used", node: st.MakeNode("n").GPUs(16, 16).Unhealthy(0).Obj(),
			pod: st.MakePod().GPUMem(4).Obj(), policy: "binpack", want: contract.Allocation{"0": {1: 4}}},
		{name: "model constraint", node: st.MakeNode("n").GPUs(16, 16).Model(1, "NVIDIA A100-PCIE-40GB").Obj(),
			pod: st.MakePod().GPUMem(4).Annotation(contract.DefaultModelKey, "A100").Obj(), policy: "binpack", want: contract.Allocation{"0": {1: 4}}},
		{name: "containers of one pod share the accounting", node: st.MakeNode("n").GPUs(16, 16).Obj(),
			pod: st.MakePod().GPUMem(10).GPUMem(10).Obj(), policy: "binpack", want: contract.Allocation{"0": {0: 10}, "1": {1: 10}}},
		{name: "backtracks when best-fit-decreasing strands a container", node: st.MakeNode("n").GPUs(10, 10).Obj(),
			pod: st.MakePod().GPUMem(4).GPUMem(4).GPUMem(3).GPUMem(3).GPUMem(3).GPUMem(3).Obj(), policy: "binpack",
			want: contract.Allocation{"0": {0: 4}, "1": {1: 4}, "2": {0: 3}, "3": {0: 3}, "4": {1: 3}, "5": {1: 3}}},
		{name: "two cards for one container", node: st.MakeNode("n").GPUs(16, 16, 16).Obj(), bound: busy,
			pod:    st.MakePod().GPUMem(16).Annotation(contract.DefaultGPUsPerContainer, "2").Obj(),
			policy: "binpack", want: contract.Allocation{"0": {1: 8, 2: 8}}},
		{name: "init container reuses the app's card", node: st.MakeNode("n").GPUs(16, 16).Obj(),
			pod: st.MakePod().InitGPUMem(12).GPUMem(12).Obj(), policy: "binpack", want: contract.Allocation{"init-0": {0: 12}, "0": {0: 12}}},
		{name: "whole card request needs an empty card", node: st.MakeNode("n").GPUs(16, 16, 16).Obj(), bound: busy,
			pod: st.MakePod().GPUMem(16).Obj(), policy: "binpack", want: contract.Allocation{"0": {2: 16}}},
		{name: "largest free block too small", node: st.MakeNode("n").GPUs(8, 8).Obj(),
			bound: []*v1.Pod{used("x", `{"0":{"0":5}}`, 5), used("y", `{"0":{"1":5}}`, 5)},
			pod:   st.MakePod().GPUMem(6).Obj(), policy: "binpack",
			wantReason: "GPU memory: largest free block 3 GiB on GPU0, pod needs 6 GiB", wantSummary: "GPU memory: no GPU has 6 GiB free"},
		{name: "more than any card has", node: st.MakeNode("n").GPUs(8, 8).Obj(), pod: st.MakePod().GPUMem(9).Obj(), policy: "binpack",
			wantReason: "GPU memory: largest GPU has 8 GiB, pod needs 9 GiB on one GPU", wantSummary: "GPU memory: no GPU has 9 GiB"},
		{name: "all unhealthy", node: st.MakeNode("n").GPUs(8).Unhealthy(0).Obj(), pod: st.MakePod().GPUMem(1).Obj(), policy: "binpack",
			wantReason: "GPU memory: all 1 GPUs of the node are unhealthy", wantSummary: "GPU memory: all GPUs of the node are unhealthy"},
		{name: "wrong model", node: st.MakeNode("n").GPUs(8).Obj(), pod: st.MakePod().GPUMem(1).Annotation(contract.DefaultModelKey, "H100").Obj(),
			policy: "binpack", wantReason: `GPU model: pod accepts H100, node has "Tesla T4"`, wantSummary: "GPU model: no healthy GPU of model H100"},
		{name: "containers do not fit together", node: st.MakeNode("n").GPUs(16, 16).Obj(),
			pod: st.MakePod().GPUMem(10).GPUMem(10).GPUMem(10).Obj(), policy: "binpack",
			wantReason:  "GPU memory: the pod's 3 containers (30 GiB in all) do not fit together on the free GPU memory",
			wantSummary: "GPU memory: the pod's 3 containers (30 GiB in all) do not fit together on the free GPU memory"},
		{name: "one container over too few cards with its ask free", node: st.MakeNode("n").GPUs(16, 16, 16).Obj(),
			bound: []*v1.Pod{used("x", `{"0":{"0":8}}`, 8), used("y", `{"0":{"1":8}}`, 8)},
			pod:   st.MakePod().GPUMem(24).Annotation(contract.DefaultGPUsPerContainer, "2").Obj(), policy: "binpack",
			wantReason: "GPU memory: fewer than 2 GPUs have 12 GiB free", wantSummary: "GPU memory: fewer than 2 GPUs have 12 GiB free"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := nodeWith(t, tt.node, tt.bound...)
			req := mustRequest(t, tt.pod)
			plan, ok := placement.PlanPod(node, req, scorer(t, tt.policy))
			if tt.wantReason != "" {
				if ok {
					t.Fatalf("PlanPod() = %v, want no fit", plan.Allocation(node, req))
				}
				fe := placement.Explain(node, req, "GiB")
				if fe.Reason != tt.wantReason || fe.Summary != tt.wantSummary {
					t.Errorf("Explain() = %q (summary %q), want %q (summary %q)", fe.Reason, fe.Summary, tt.wantReason, tt.wantSummary)
				}
				sums := placement.NewSummaries(req, "GiB")
				sum := sums.Explain(node)
				if sum.Summary != fe.Summary || sum.Unresolvable != fe.Unresolvable || sum.Reason != "" {
					t.Errorf("Summaries.Explain() = %+v, want the summary and resolvability of %+v", sum, fe)
				}
				if again := sums.Explain(node); again != sum {
					t.Error("Summaries.Explain worded the same misfit twice")
				}
				return
			}
			if !ok {
				t.Fatalf("PlanPod() found no fit: %v", placement.Explain(node, req, "GiB"))
			}
			if diff := cmp.Diff(tt.want, plan.Allocation(node, req)); diff != "" {
				t.Errorf("allocation (-want,+got):\n%s", diff)
			}
			if err := node.CheckFit(req, plan.Allocation(node, req)); err != nil {
				t.Errorf("plan does not fit the node: %v", err)
			}
		})
	}
}
