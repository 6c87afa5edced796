// Package testing builds hand-made node snapshots and workloads for placement tests and
// benchmarks.
package testing

import (
	"fmt"
	"math/rand/v2"

	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

// OpenbLikeCluster is n hand-built snapshots of nodes like openb's (8-card G2 with 96 CPUs and
// 2-card T4 with 104), their cards part used at random, with distinct IDs.
func OpenbLikeCluster(n int, rng *rand.Rand) []*placement.NodeInfo {
	nodes := make([]*placement.NodeInfo, n)
	for i := range nodes {
		cards, model, cpu := 8, "G2", int64(96000)
		if i%3 == 2 {
			cards, model, cpu = 2, "T4", 104000
		}
		node := &placement.NodeInfo{Name: fmt.Sprintf("node-%05d", i), ID: i, AllocatableMilliCPU: cpu,
			RequestedMilliCPU: rng.Int64N(cpu / 2), AllocatableMemory: 512 << 30}
		for g := range cards {
			used := []int64{0, 0, 1000, 810, 470, 650, 320}[rng.IntN(7)]
			node.GPUs = append(node.GPUs, placement.GPUInfo{Index: g, Model: model, Capacity: 1000, Used: used, Healthy: true})
		}
		node.Summarize()
		nodes[i] = node
	}
	return nodes
}

// OpenbLikeWorkload is one pod of each shape of an openb-like workload, a CPU-only one and an
// eight-card one among them.
func OpenbLikeWorkload() []placement.Demand {
	var out []placement.Demand
	for _, s := range []struct {
		units int64
		gpus  int
		cpu   int64
	}{{810, 1, 3150}, {1000, 1, 11300}, {470, 1, 10000}, {650, 1, 11500}, {320, 1, 4700}, {0, 0, 2000}, {8000, 8, 64000}} {
		r := gpumem.PodRequest{}
		if s.gpus > 0 {
			r.Containers = []gpumem.ContainerRequest{{Key: "0", Units: s.units, GPUs: s.gpus}}
		}
		out = append(out, placement.Demand{Req: r, Res: placement.PodResources{MilliCPU: s.cpu, Memory: 8 << 30}})
	}
	return out
}
