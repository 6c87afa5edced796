package cache

import (
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// topologyOf is the placement topology of a node's inventory (DecodeGPUs' result): the score of
// every link of its contract.Topology, in the inventory's order, which is the order of the
// node's GPUInfo. It is nil when no card carries links, and nil with an error wrapping
// contract.ErrInvalidTopology when they do not form a matrix over the cards.
func topologyOf(gpus []contract.GPU) (*placement.Topology, error) {
	t, err := contract.TopologyOf(gpus)
	if err != nil || t == nil {
		return nil, err
	}
	return placement.NewTopology(t.Cards(), func(i, j int) int { return t.Link(i, j).Score() }), nil
}
