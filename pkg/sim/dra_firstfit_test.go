package sim

import (
	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

// testCard is one card of a hand-built node: its free units of 1000, its model, and whether it
// is unhealthy.
type testCard struct {
	free      int64
	model     string
	unhealthy bool
}

// cardNode is a node snapshot with cards, each of 1000 units.
func cardNode(name string, cards ...testCard) *placement.NodeInfo {
	n := &placement.NodeInfo{Name: name, AllocatableMilliCPU: 64000, AllocatableMemory: 256 << 30}
	for i, c := range cards {
		model := c.model
		if model == "" {
			model = "T4"
		}
		n.GPUs = append(n.GPUs, placement.GPUInfo{Index: i, Model: model, Capacity: 1000, Used: 1000 - c.free, Healthy: !c.unhealthy})
	}
	n.Summarize()
	return n
}

// frees is cards of the given free units.
func frees(free ...int64) []testCard {
	out := make([]testCard, len(free))
	for i, f := range free {
		out[i] = testCard{free: f}
	}
	return out
}

// claim is a one-container request for count cards of units each, accepting models (any when
// none).
func claim(units int64, count int, models ...string) *gpumem.PodRequest {
	r := &gpumem.PodRequest{Containers: []gpumem.ContainerRequest{{Key: "0", Units: units * int64(count), GPUs: count}}}
	if len(models) > 0 {
		r.SetModels(models)
	}
	return r
}
