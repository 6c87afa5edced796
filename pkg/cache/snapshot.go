package cache

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// buildSnapshot computes a node's immutable snapshot, leaving out the pods in skip.
// Caller holds the cache lock (read or write).
func buildSnapshot(ns *nodeState, skip map[types.UID]bool) *NodeInfo {
	n := &NodeInfo{
		Name: ns.name, Inventory: ns.inventory,
		GPUs:                append([]GPUInfo(nil), ns.gpus...),
		AllocatableMilliCPU: ns.cpu, AllocatableMemory: ns.mem,
	}
	pos := make(map[int]int, len(n.GPUs))
	for i := range n.GPUs {
		pos[n.GPUs[i].Index] = i
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
		chargePod(n, pos, ps)
	}
	sort.Slice(n.Pods, func(i, j int) bool { return n.Pods[i].Key() < n.Pods[j].Key() })
	n.Summarize()
	return n
}

// Summarize fills the fields derived from GPUs and PendingUnits: MaxFree, the compact card
// views (Cards, UsableFree) and the unit totals. The cache does it for every snapshot; code
// that builds a NodeInfo itself (tests, tools) calls it once GPUs are set, as placement reads
// MaxFree.
func (n *NodeInfo) Summarize() {
	n.MaxFree = 0
	if len(n.GPUs) <= maxInlineCards {
		n.Cards, n.usable = n.cardBuf[:len(n.GPUs)], n.usableBuf[:len(n.GPUs)]
	} else {
		n.Cards, n.usable = make([]CardFit, len(n.GPUs)), make([]int64, len(n.GPUs))
	}
	for i := range n.GPUs {
		g := &n.GPUs[i]
		n.Cards[i] = CardFit{Free: g.Free(), Used: g.Used, Capacity: g.Capacity, Healthy: g.Healthy}
		n.usable[i] = usableFree(g)
		if g.Healthy {
			n.MaxFree = max(n.MaxFree, g.Free())
		}
	}
	n.total, n.used = n.TotalUnits(), n.UsedUnits()
	n.summed = true
}

// chargePod adds a pod's units to its GPUs, or to PendingUnits when it has no placement or its
// placement names GPUs the node does not have.
func chargePod(n *NodeInfo, pos map[int]int, ps *podState) {
	if ps.perGPU == nil {
		n.PendingUnits += ps.info.Units
		return
	}
	for g, u := range ps.perGPU {
		if i, ok := pos[g]; ok {
			n.GPUs[i].Used += u
		} else {
			n.PendingUnits += u
		}
	}
}

// podCPUMem is a pod's effective CPU (milli) and memory (bytes) requests as kube-scheduler
// counts them: max of the largest init container and the sum of app containers, plus overhead.
func podCPUMem(pod *v1.Pod) (cpu, mem int64) {
	for i := range pod.Spec.Containers {
		r := pod.Spec.Containers[i].Resources.Requests
		cpu += r.Cpu().MilliValue()
		mem += r.Memory().Value()
	}
	for i := range pod.Spec.InitContainers {
		r := pod.Spec.InitContainers[i].Resources.Requests
		cpu = max(cpu, r.Cpu().MilliValue())
		mem = max(mem, r.Memory().Value())
	}
	if o := pod.Spec.Overhead; o != nil {
		cpu += o.Cpu().MilliValue()
		mem += o.Memory().Value()
	}
	return cpu, mem
}
