package cache

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// inventory is what a node object says of its cards.
type inventory struct {
	gpus     []placement.GPUInfo
	source   placement.InventorySource
	topology *placement.Topology // nil when the annotation has none, or an invalid one
}

// inventoryOf reads a node's cards: from the plugin's annotation when present and valid, else
// allocatable gpu-mem split evenly over gpu-count (all healthy, model unknown). The error tells
// why a present annotation was not used, or, wrapping contract.ErrInvalidTopology, why its
// topology was not (the cards are used without it).
func inventoryOf(node *v1.Node, names *contract.Names) (inventory, error) {
	raw, ok := node.Annotations[names.NodeGPUsAnnotation]
	if !ok {
		gpus, err := evenSplit(node, names)
		return inventory{gpus: gpus, source: placement.FromEvenSplit}, err
	}
	gpus, err := contract.DecodeGPUs(raw)
	if err != nil {
		split, splitErr := evenSplit(node, names)
		return inventory{gpus: split, source: placement.FromEvenSplit}, errors.Join(err, splitErr)
	}
	out := make([]placement.GPUInfo, len(gpus))
	for i, g := range gpus {
		out[i] = placement.GPUInfo{Index: g.Index, UUID: g.UUID, Model: g.Model, Capacity: g.Units, Healthy: g.Healthy}
	}
	topology, err := topologyOf(gpus)
	return inventory{gpus: out, source: placement.FromAnnotation, topology: topology}, err
}

// evenSplit is allocatable gpu-mem split over gpu-count cards; a node beyond MaxGPUsPerNode
// cards or MaxUnitsPerGPU units per card gets none, and an error says why.
func evenSplit(node *v1.Node, names *contract.Names) ([]placement.GPUInfo, error) {
	total := quantity(node, names.Resource)
	count := quantity(node, names.Count)
	if total <= 0 {
		return nil, nil
	}
	if count <= 0 {
		count = 1
	}
	switch {
	case count > contract.MaxGPUsPerNode:
		return nil, fmt.Errorf("%w: %s=%d, at most %d GPUs per node are accepted; the node gets no GPUs",
			contract.ErrInvalidInventory, names.Count, count, contract.MaxGPUsPerNode)
	case total/count > contract.MaxUnitsPerGPU:
		return nil, fmt.Errorf("%w: %s=%d over %d GPUs is more than %d units per GPU; the node gets no GPUs",
			contract.ErrInvalidInventory, names.Resource, total, count, contract.MaxUnitsPerGPU)
	}
	out := make([]placement.GPUInfo, count)
	for i := range out {
		out[i] = placement.GPUInfo{Index: i, Capacity: total / count, Healthy: true}
	}
	return out, nil
}

// quantity is the node's allocatable amount of a resource, else its capacity, else 0.
func quantity(node *v1.Node, name v1.ResourceName) int64 {
	if q, ok := node.Status.Allocatable[name]; ok {
		return q.Value()
	}
	if q, ok := node.Status.Capacity[name]; ok {
		return q.Value()
	}
	return 0
}
