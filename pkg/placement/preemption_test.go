package placement_test

import (
	"fmt"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

func TestPlanPreemption(t *testing.T) {
	on := func(name, alloc string, units int64) *v1.Pod {
		return st.MakePod().Name(name).GPUMem(units).Node("n").Placement(alloc).Obj()
	}
	// priorities by pod name; "t-" pods are terminating, "keep-" pods protected.
	prio := map[string]int32{"a": 0, "b": 0, "c": 0, "d": 5, "e": 1, "hi": 100, "eq": 10, "neg": -5}
	info := func(p *placement.PodInfo) placement.VictimInfo {
		return placement.VictimInfo{Priority: prio[p.Name], Terminating: p.Name[0] == 't', Protected: p.Name[0] == 'k'}
	}
	tests := []struct {
		name        string
		node        *v1.Node
		pods        []*v1.Pod
		ask         *v1.Pod
		priority    int32
		wantVictims []string // nil: no plan
		wantGPU     int
	}{
		{
			name: "fragmented: one small victim on one card, not the big one",
			node: st.MakeNode("n").GPUs(16, 16).Obj(),
			pods: []*v1.Pod{on("a", `{"0":{"0":6}}`, 6), on("b", `{"0":{"0":4}}`, 4), on("c", `{"0":{"1":10}}`, 10)},
			ask:  st.MakePod().Name("p").GPUMem(8).Obj(), priority: 10,
			wantVictims: []string{"b"}, wantGPU: 0,
		},
		{
			name: "lower priority wins at equal count",
			node: st.MakeNode("n").GPUs(16, 16).Obj(),
			pods: []*v1.Pod{on("d", `{"0":{"0":10}}`, 10), on("e", `{"0":{"1":10}}`, 10)},
			ask:  st.MakePod().Name("p").GPUMem(8).Obj(), priority: 10,
			wantVictims: []string{"e"}, wantGPU: 1,
		},
		{
			name: "fewest victims before lowest priority",
			node: st.MakeNode("n").GPUs(16, 16).Obj(),
			pods: []*v1.Pod{on("a", `{"0":{"0":5}}`, 5), on("b", `{"0":{"0":5}}`, 5), on("c", `{"0":{"0":6}}`, 6), on("d", `{"0":{"1":16}}`, 16)},
			ask:  st.MakePod().Name("p").GPUMem(12).Obj(), priority: 10,
			wantVictims: []string{"d"}, wantGPU: 1,
		},
		{
			name: "on one card, a lower priority beats the largest pod",
			node: st.MakeNode("n").GPUs(16).Obj(),
			pods: []*v1.Pod{on("d", `{"0":{"0":8}}`, 8), on("a", `{"0":{"0":6}}`, 6)},
			ask:  st.MakePod().Name("p").GPUMem(8).Obj(), priority: 10,
			wantVictims: []string{"a"}, wantGPU: 0,
		},
		{
			name: "on one card at equal priority, less memory evicted",
			node: st.MakeNode("n").GPUs(16).Obj(),
			pods: []*v1.Pod{on("b", `{"0":{"0":8}}`, 8), on("a", `{"0":{"0":6}}`, 6)},
			ask:  st.MakePod().Name("p").GPUMem(8).Obj(), priority: 10,
			wantVictims: []string{"a"}, wantGPU: 0,
		},
		{
			name: "equal priority is never a victim",
			node: st.MakeNode("n").GPUs(16).Obj(),
			pods: []*v1.Pod{on("eq", `{"0":{"0":12}}`, 12)},
			ask:  st.MakePod().Name("p").GPUMem(8).Obj(), priority: 10,
		},
		{
			name: "higher priority is never a victim",
			node: st.MakeNode("n").GPUs(16).Obj(),
			pods: []*v1.Pod{on("hi", `{"0":{"0":12}}`, 12)},
			ask:  st.MakePod().Name("p").GPUMem(8).Obj(), priority: 10,
		},
		{
			name: "a protected pod keeps its memory",
			node: st.MakeNode("n").GPUs(16).Obj(),
			pods: []*v1.Pod{on("keep", `{"0":{"0":12}}`, 12)},
			ask:  st.MakePod().Name("p").GPUMem(8).Obj(), priority: 10,
		},
		{
			name: "card too small even empty",
			node: st.MakeNode("n").GPUs(8).Obj(),
			pods: []*v1.Pod{on("a", `{"0":{"0":8}}`, 8)},
			ask:  st.MakePod().Name("p").GPUMem(12).Obj(), priority: 10,
		},
		{
			name: "a terminating pod frees its memory without a victim",
			node: st.MakeNode("n").GPUs(16).Obj(),
			pods: []*v1.Pod{on("t1", `{"0":{"0":12}}`, 12)},
			ask:  st.MakePod().Name("p").GPUMem(8).Obj(), priority: 10,
			wantVictims: []string{}, wantGPU: 0,
		},
		{
			name: "negative priorities",
			node: st.MakeNode("n").GPUs(16).Obj(),
			pods: []*v1.Pod{on("neg", `{"0":{"0":12}}`, 12)},
			ask:  st.MakePod().Name("p").GPUMem(8).Obj(), priority: 0,
			wantVictims: []string{"neg"}, wantGPU: 0,
		},
		{
			name: "a two-card pod does not preempt",
			node: st.MakeNode("n").GPUs(16, 16).Obj(),
			pods: []*v1.Pod{on("a", `{"0":{"0":12}}`, 12), on("b", `{"0":{"1":12}}`, 12)},
			ask:  st.MakePod().Name("p").GPUMem(16).Annotation(contract.DefaultGPUsPerContainer, "2").Obj(), priority: 10,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := nodeWith(t, tt.node, tt.pods...)
			plan, ok := placement.PlanPreemption(node, mustRequest(t, tt.ask), tt.priority, info)
			if tt.wantVictims == nil {
				if ok {
					t.Fatalf("PlanPreemption() = %+v, want no plan", plan)
				}
				return
			}
			if !ok {
				t.Fatal("PlanPreemption() found no plan")
			}
			got := []string{}
			for _, v := range plan.Victims {
				got = append(got, v.Name)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.wantVictims) || plan.GPU != tt.wantGPU {
				t.Errorf("victims %v on GPU %d, want %v on GPU %d", got, plan.GPU, tt.wantVictims, tt.wantGPU)
			}
		})
	}
}

// TestPlanPreemptionOverHeldCard: a caller's view may count units held for other preemptors as
// used beyond the card's capacity. The held units come out of what the terminating pods and the
// victims free: the same terminating memory is not planned on twice.
func TestPlanPreemptionOverHeldCard(t *testing.T) {
	info := func(p *placement.PodInfo) placement.VictimInfo {
		return placement.VictimInfo{Priority: 0, Terminating: p.Name[0] == 't'}
	}
	tests := []struct {
		name        string
		pods        []*v1.Pod
		held        int64 // units held on card 0 for other preemptors
		wantVictims []string
		wantWaiting []string // nil with wantVictims nil: no plan
	}{
		{name: "half of a terminating pod's memory held: the other half is the pod's", pods: []*v1.Pod{
			st.MakePod().Name("t1").GPUMem(16).Node("n").Placement(`{"0":{"0":16}}`).Obj()}, held: 8, wantVictims: []string{}, wantWaiting: []string{"t1"}},
		{name: "all of a terminating pod's memory held: nothing left", pods: []*v1.Pod{
			st.MakePod().Name("t1").GPUMem(16).Node("n").Placement(`{"0":{"0":16}}`).Obj()}, held: 16},
		{name: "held beyond what is free: a victim frees the rest", pods: []*v1.Pod{
			st.MakePod().Name("t1").GPUMem(8).Node("n").Placement(`{"0":{"0":8}}`).Obj(),
			st.MakePod().Name("a").GPUMem(8).Node("n").Placement(`{"0":{"0":8}}`).Obj()}, held: 8, wantVictims: []string{"a"}, wantWaiting: []string{"t1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node := *nodeWith(t, st.MakeNode("n").GPUs(16).Obj(), tt.pods...)
			node.SetGPUs(node.GPUs)
			node.GPUs[0].Used += tt.held
			node.Summarize()
			plan, ok := placement.PlanPreemption(&node, mustRequest(t, st.MakePod().Name("p").GPUMem(8).Obj()), 10, info)
			if ok != (tt.wantWaiting != nil) {
				t.Fatalf("PlanPreemption() = %+v, %v; want a plan: %v", plan, ok, tt.wantWaiting != nil)
			}
			names := func(pods []placement.PodInfo) []string {
				out := []string{}
				for _, p := range pods {
					out = append(out, p.Name)
				}
				return out
			}
			if ok && (!slices.Equal(names(plan.Victims), tt.wantVictims) || !slices.Equal(names(plan.Waiting), tt.wantWaiting)) {
				t.Errorf("victims %v waiting %v, want %v and %v", names(plan.Victims), names(plan.Waiting), tt.wantVictims, tt.wantWaiting)
			}
		})
	}
}

// BenchmarkPlanPreemption plans on a full node of 8 x 16 GiB cards holding 64 pods of 2 GiB,
// all of lower priority: every card is a candidate, as in a busy cluster's preemption.
func BenchmarkPlanPreemption(b *testing.B) {
	var pods []*v1.Pod
	for i := range 64 {
		card := i % 8
		pods = append(pods, st.MakePod().Name(fmt.Sprintf("v%02d", i)).GPUMem(2).Node("n").Placement(fmt.Sprintf(`{"0":{"%d":2}}`, card)).Obj())
	}
	node := nodeWith(b, st.MakeNode("n").GPUs(16, 16, 16, 16, 16, 16, 16, 16).Obj(), pods...)
	req := mustRequest(b, st.MakePod().Name("p").GPUMem(6).Obj())
	info := func(*placement.PodInfo) placement.VictimInfo { return placement.VictimInfo{} }
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := placement.PlanPreemption(node, req, 10, info); !ok {
			b.Fatal("no plan")
		}
	}
}
