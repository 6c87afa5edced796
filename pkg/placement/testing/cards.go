package testing

import (
	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

// Card is one card of a hand-built node: its free units of 1000, its model ("T4" when empty),
// and whether it is unhealthy.
type Card struct {
	Free      int64
	Model     string
	Unhealthy bool
}

// CardNode is a node snapshot named name with cards, each of 1000 units, in index order.
func CardNode(name string, cards ...Card) *placement.NodeInfo {
	n := &placement.NodeInfo{Name: name, AllocatableMilliCPU: 64000, AllocatableMemory: 256 << 30}
	for i, c := range cards {
		model := c.Model
		if model == "" {
			model = "T4"
		}
		n.GPUs = append(n.GPUs, placement.GPUInfo{Index: i, Model: model, Capacity: 1000, Used: 1000 - c.Free, Healthy: !c.Unhealthy})
	}
	n.Summarize()
	return n
}

// Frees is healthy cards of the given free units.
func Frees(free ...int64) []Card {
	out := make([]Card, len(free))
	for i, f := range free {
		out[i] = Card{Free: f}
	}
	return out
}

// Claim is a one-container request for count cards of units each, accepting models (any when
// none).
func Claim(units int64, count int, models ...string) *gpumem.PodRequest {
	r := &gpumem.PodRequest{Containers: []gpumem.ContainerRequest{{Key: "0", Units: units * int64(count), GPUs: count}}}
	if len(models) > 0 {
		r.SetModels(models)
	}
	return r
}
