package cache

import (
	"sort"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/placement"
)

// buildSnapshot computes a node's immutable snapshot, leaving out the pods in skip.
// Caller holds the cache lock (read or write).
func buildSnapshot(ns *nodeState, skip map[types.UID]bool) *placement.NodeInfo {
	n := &placement.NodeInfo{
		Name: ns.name, ID: ns.id, Inventory: ns.inventory,
		AllocatableMilliCPU: ns.cpu, AllocatableMemory: ns.mem, Topology: ns.topology,
	}
	if ns.dra {
		n.Inventory = placement.FromResourceSlice
		n.SetGPUs(ns.draGPUs)
	} else {
		n.SetGPUs(ns.gpus)
	}
	for uid, ps := range ns.pods {
		if skip[uid] {
			continue
		}
		n.RequestedMilliCPU += ps.cpu
		n.RequestedMemory += ps.mem
		if ps.info.Units == 0 {
			continue
		}
		n.Pods = append(n.Pods, ps.info)
		chargePod(n, ps)
	}
	chargeClaims(n, ns, skip)
	sort.Slice(n.Pods, func(i, j int) bool { return placement.CompareKeys(&n.Pods[i], &n.Pods[j]) < 0 })
	n.Summarize()
	return n
}

// chargePod adds a pod's units to its GPUs, or to PendingUnits when it has no placement or its
// placement names GPUs the node does not have.
func chargePod(n *placement.NodeInfo, ps *podState) {
	if ps.perGPU == nil {
		n.PendingUnits += ps.info.Units
		return
	}
	for g, u := range ps.perGPU {
		if i, ok := gpuPosition(n.GPUs, g); ok {
			n.GPUs[i].Used += u
		} else {
			n.PendingUnits += u
		}
	}
}

// gpuPosition is the position in gpus of the card with NVML index g: g itself on the usual
// node, whose cards are listed 0, 1, 2, ..., else found by a scan (a node has a few cards).
func gpuPosition(gpus []placement.GPUInfo, g int) (int, bool) {
	if g >= 0 && g < len(gpus) && gpus[g].Index == g {
		return g, true
	}
	for i := range gpus {
		if gpus[i].Index == g {
			return i, true
		}
	}
	return -1, false
}
