package sim

import (
	"fmt"
	"math"
	"testing"

	"github.com/gpushare/gpushare/pkg/placement"
	placementtesting "github.com/gpushare/gpushare/pkg/placement/testing"
)

// resNode is a node snapshot with CPU and memory allocatable and requested, and cards.
func resNode(name string, cpuAlloc, cpuReq, memAlloc, memReq int64, cards ...placementtesting.Card) *placement.NodeInfo {
	n := placementtesting.CardNode(name, cards...)
	n.AllocatableMilliCPU, n.RequestedMilliCPU, n.AllocatableMemory, n.RequestedMemory = cpuAlloc, cpuReq, memAlloc, memReq
	return n
}

// wantKubeScore restates kube-scheduler's default scores in floating point: LeastAllocated is
// the mean over the resources the node has of floor(100 x unrequested share after the pod),
// 0 once over, floored; BalancedAllocation is 50 + floor((50 + b(with pod) - b(without))/2)
// with b = floor(100 - 50 x |cpu share - memory share|), shares capped at 1 (b = 100 with one
// resource), and 0 for a pod that asks neither.
func wantKubeScore(n *placement.NodeInfo, res placement.PodResources) int64 {
	type r struct{ alloc, before, pod float64 }
	rs := []r{}
	for _, x := range []r{
		{float64(n.AllocatableMilliCPU), float64(n.RequestedMilliCPU), float64(res.MilliCPU)},
		{float64(n.AllocatableMemory), float64(n.RequestedMemory), float64(res.Memory)},
	} {
		if x.alloc > 0 {
			rs = append(rs, x)
		}
	}
	least := 0.0
	for _, x := range rs {
		least += math.Floor(100 * math.Max(0, x.alloc-x.before-x.pod) / x.alloc)
	}
	if len(rs) > 0 {
		least = math.Floor(least / float64(len(rs)))
	}
	if res.MilliCPU == 0 && res.Memory == 0 {
		return int64(least)
	}
	b := func(withPod float64) float64 {
		if len(rs) < 2 {
			return 100
		}
		share := func(x r) float64 { return math.Min(1, (x.before+withPod*x.pod)/x.alloc) }
		return math.Floor(100 - 50*math.Abs(share(rs[0])-share(rs[1])))
	}
	return int64(least + 50 + math.Floor((50+b(1)-b(0))/2))
}

func TestKubeScore(t *testing.T) {
	const gib = 1 << 30
	tests := []struct {
		name string
		node *placement.NodeInfo
		res  placement.PodResources
	}{
		{name: "empty node, balanced pod", node: resNode("n", 64000, 0, 256*gib, 0), res: placement.PodResources{MilliCPU: 8000, Memory: 32 * gib}},
		{name: "CPU-heavy node, memory-heavy pod: better balance", node: resNode("n", 64000, 40000, 256*gib, 20*gib), res: placement.PodResources{MilliCPU: 1000, Memory: 90 * gib}},
		{name: "balanced node, CPU-heavy pod: worse balance", node: resNode("n", 64000, 16000, 256*gib, 64*gib), res: placement.PodResources{MilliCPU: 30000, Memory: 3 * gib}},
		{name: "pod over the node's CPU", node: resNode("n", 64000, 50000, 256*gib, 10*gib), res: placement.PodResources{MilliCPU: 20000, Memory: 5 * gib}},
		{name: "pod asking neither", node: resNode("n", 64000, 12000, 256*gib, 77*gib), res: placement.PodResources{}},
		{name: "node without memory allocatable", node: resNode("n", 96000, 13000, 0, 0), res: placement.PodResources{MilliCPU: 7000, Memory: gib}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := KubeScore(tt.node, tt.res), wantKubeScore(tt.node, tt.res); got != want {
				t.Errorf("KubeScore = %d, want %d", got, want)
			}
		})
	}
}

// argmaxScore is the index of the node of nodes with the highest wantKubeScore among those
// with the pod's CPU and memory free and its claim's cards (placement.FirstFit), the first on ties; -1
// for none.
func argmaxScore(nodes []*placement.NodeInfo, res placement.PodResources, units int64) int {
	best, bestScore := -1, int64(0)
	for i, n := range nodes {
		if _, ok := placement.FirstFit(n, CardOrderIndex, units, 1, placementtesting.Claim(units, 1)); !ok || !podFits(n, res) {
			continue
		}
		if s := wantKubeScore(n, res); best < 0 || s > bestScore {
			best, bestScore = i, s
		}
	}
	return best
}

func TestKubeSchedulerChooses(t *testing.T) {
	const gib = 1 << 30
	pod := placement.PodResources{MilliCPU: 8000, Memory: 16 * gib}
	free := placementtesting.Frees(1000, 1000)
	tests := []struct {
		name  string
		nodes []*placement.NodeInfo
		units int64
	}{
		{name: "the least allocated node", units: 500, nodes: []*placement.NodeInfo{
			resNode("a", 64000, 40000, 256*gib, 100*gib, free...), resNode("b", 64000, 8000, 256*gib, 30*gib, free...), resNode("c", 64000, 20000, 256*gib, 60*gib, free...)}},
		{name: "the node whose cards cannot take the claim is filtered out", units: 500, nodes: []*placement.NodeInfo{
			resNode("a", 64000, 40000, 256*gib, 100*gib, free...), resNode("b", 64000, 0, 256*gib, 0, placementtesting.Frees(400, 300)...)}},
		{name: "the node without the pod's CPU is filtered out", units: 500, nodes: []*placement.NodeInfo{
			resNode("a", 64000, 60000, 256*gib, 0, free...), resNode("b", 64000, 50000, 256*gib, 200*gib, free...)}},
		{name: "a better balance beats an equal LeastAllocated", units: 500, nodes: []*placement.NodeInfo{
			resNode("a", 64000, 32000, 256*gib, 64*gib, free...), resNode("b", 64000, 16000, 256*gib, 128*gib, free...)}},
		{name: "equal scores: the first node found", units: 500, nodes: []*placement.NodeInfo{
			resNode("a", 64000, 0, 256*gib, 0, free...), resNode("b", 64000, 0, 256*gib, 0, free...), resNode("c", 64000, 0, 256*gib, 0, free...)}},
		{name: "one feasible node", units: 900, nodes: []*placement.NodeInfo{
			resNode("a", 64000, 0, 256*gib, 0, placementtesting.Frees(800)...), resNode("b", 64000, 60000, 256*gib, 0, free...)}},
		{name: "no feasible node", units: 900, nodes: []*placement.NodeInfo{resNode("a", 64000, 0, 256*gib, 0, placementtesting.Frees(800)...)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := placement.NewDecision(firstFit(nil, CardOrderIndex), placementtesting.Claim(tt.units, 1), pod)
			k := &kubeScheduler{}
			got, ok := k.choose(d, tt.nodes)
			want := argmaxScore(tt.nodes, pod, tt.units)
			switch {
			case want < 0 && ok:
				t.Errorf("chose %s, want no node", got.Name)
			case want >= 0 && (!ok || got != tt.nodes[want]):
				t.Errorf("chose %v (found %v), want %s", got, ok, tt.nodes[want].Name)
			}
		})
	}
}

// TestKubeSchedulerRotates: on more nodes than kube-scheduler scores, a cycle looks at
// numFeasibleNodesToFind nodes from where the last one stopped; on identical nodes each cycle
// takes the first node it found.
func TestKubeSchedulerRotates(t *testing.T) {
	nodes := make([]*placement.NodeInfo, 250)
	for i := range nodes {
		nodes[i] = resNode(fmt.Sprintf("n%03d", i), 64000, 0, 256<<30, 0, placementtesting.Frees(1000)...)
	}
	k := &kubeScheduler{}
	step := k.sampler.numFeasibleNodesToFind(len(nodes))
	d := placement.NewDecision(firstFit(nil, CardOrderIndex), placementtesting.Claim(100, 1), placement.PodResources{MilliCPU: 1000, Memory: 1 << 30})
	for cycle := range 4 {
		got, ok := k.choose(d, nodes)
		if want := nodes[cycle*step%len(nodes)]; !ok || got != want {
			t.Errorf("cycle %d: chose %v, want %s (cycles look at %d nodes)", cycle, got, want.Name, step)
		}
	}
}
