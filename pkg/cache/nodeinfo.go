package cache

import (
	"fmt"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/contract"
)

// PodState is where a pod is in the cache's state machine (see Cache).
type PodState string

// Pod states.
const (
	// PodAssumed: the extender chose a placement and is binding the pod.
	PodAssumed PodState = "Assumed"
	// PodBound: the informer reported the pod bound to the node.
	PodBound PodState = "Bound"
)

// InventorySource says where a node's per-GPU capacities came from.
type InventorySource string

// Inventory sources.
const (
	// FromAnnotation: the device plugin's node annotation (per-GPU size, model, health).
	FromAnnotation InventorySource = "annotation"
	// FromEvenSplit: no usable annotation; gpu-mem split evenly over gpu-count.
	FromEvenSplit InventorySource = "even-split"
)

// GPUInfo is one card of a node.
type GPUInfo struct {
	// Index is the NVML index.
	Index int `json:"index"`
	// UUID is the card's UUID, empty without the plugin annotation.
	UUID string `json:"uuid,omitempty"`
	// Model is the card's model, empty without the plugin annotation.
	Model string `json:"model,omitempty"`
	// Capacity is the card's memory in units.
	Capacity int64 `json:"capacity"`
	// Used is the units held by pods placed on the card.
	Used int64 `json:"used"`
	// Healthy is false when the plugin reported the card unhealthy.
	Healthy bool `json:"healthy"`
}

// Free is the card's unused units (never negative).
func (g *GPUInfo) Free() int64 { return max(0, g.Capacity-g.Used) }

// CardFit is the part of a card that placement loops read, kept apart from GPUInfo (whose
// strings make it a cache line long) so that a scan of a node's cards touches little memory.
type CardFit struct {
	// Free is the card's unused units.
	Free int64
	// Used and Capacity mirror GPUInfo's.
	Used, Capacity int64
	// Healthy mirrors GPUInfo.Healthy.
	Healthy bool
}

// PodInfo is a pod holding GPU memory on a node.
type PodInfo struct {
	// Namespace and Name identify the pod.
	Namespace string `json:"namespace"`
	// Name is the pod's name.
	Name string `json:"name"`
	// UID is the pod's UID.
	UID types.UID `json:"uid"`
	// Node is the node the pod is on.
	Node string `json:"node"`
	// State is Assumed or Bound.
	State PodState `json:"state"`
	// Units is the pod's effective gpu-mem ask.
	Units int64 `json:"units"`
	// MilliCPU is the pod's effective CPU request (learning policies rebuild from it).
	MilliCPU int64 `json:"milliCPU,omitempty"`
	// Allocation is the pod's placement; nil for a pod bound without one (pending).
	Allocation contract.Allocation `json:"allocation,omitempty"`
}

// Key is namespace/name.
func (p *PodInfo) Key() string { return p.Namespace + "/" + p.Name }

// NodeInfo is an immutable snapshot of one GPU-sharing node.
type NodeInfo struct {
	// Name is the node's name.
	Name string `json:"name"`
	// Inventory says where GPU capacities came from.
	Inventory InventorySource `json:"inventory"`
	// GPUs are the node's cards in index order.
	GPUs []GPUInfo `json:"gpus"`
	// MaxFree is the largest free block on a healthy card: a one-card ask larger than it cannot
	// fit, whatever the card's model.
	MaxFree int64 `json:"maxFree"`
	// usable is each card's free units, -1 for an unhealthy card (see UsableFree); it lives in
	// usableBuf, right after MaxFree, for nodes of up to maxInlineCards cards, so that choosing a
	// card for a one-card ask reads the node's first two cache lines only.
	usable    []int64
	usableBuf [maxInlineCards]int64

	// Cards is the compact view of GPUs (same order), filled by the cache. It lives in
	// cardBuf, next to the fields above, when the node has up to maxInlineCards cards, so that
	// a placement pass over many nodes reads one contiguous block per node.
	Cards []CardFit `json:"-"`
	// summed is true when total and used hold TotalUnits and UsedUnits.
	summed      bool
	total, used int64
	cardBuf     [maxInlineCards]CardFit

	// PendingUnits is held by pods on the node without a usable placement.
	PendingUnits int64 `json:"pendingUnits"`
	// Pods are the pods holding gpu-mem on the node, sorted by namespace/name.
	Pods []PodInfo `json:"pods"`
	// AllocatableMilliCPU and RequestedMilliCPU are the node's CPU and the sum of its pods'
	// requests; likewise memory in bytes. Placement policies use them.
	AllocatableMilliCPU int64 `json:"allocatableMilliCPU"`
	// RequestedMilliCPU is the CPU requested by all pods on the node.
	RequestedMilliCPU int64 `json:"requestedMilliCPU"`
	// AllocatableMemory is the node's allocatable memory in bytes.
	AllocatableMemory int64 `json:"allocatableMemory"`
	// RequestedMemory is the memory requested by all pods on the node.
	RequestedMemory int64 `json:"requestedMemory"`

	// derived holds a derivedBox (see Derived).
	derived atomic.Value
}

// derivedBox wraps what SetDerived stores, so that values of any type can follow each other.
type derivedBox struct{ v any }

// Derived returns what a placement policy stored with SetDerived, or nil.
func (n *NodeInfo) Derived() any {
	b, _ := n.derived.Load().(derivedBox)
	return b.v
}

// SetDerived keeps v with the snapshot: data a placement policy computed from this snapshot
// alone, found again without a lookup by name and dropped with the snapshot. The cache never
// reads it; the last call wins. Safe for concurrent use.
func (n *NodeInfo) SetDerived(v any) { n.derived.Store(derivedBox{v}) }

// maxInlineCards is how many cards a snapshot keeps inline.
const maxInlineCards = 8

// Card returns the free units and health of the card at position g.
func (n *NodeInfo) Card(g int) CardFit {
	if g < len(n.Cards) {
		return n.Cards[g]
	}
	gpu := &n.GPUs[g]
	return CardFit{Free: gpu.Free(), Used: gpu.Used, Capacity: gpu.Capacity, Healthy: gpu.Healthy}
}

// UsableFree returns each card's free units, or -1 for an unhealthy card, in GPUs' order.
// Callers must not modify the result.
func (n *NodeInfo) UsableFree() []int64 {
	if n.summed {
		return n.usable
	}
	out := make([]int64, len(n.GPUs))
	for g := range n.GPUs {
		out[g] = usableFree(&n.GPUs[g])
	}
	return out
}

// usableFree is g's free units, or -1 when it is unhealthy.
func usableFree(g *GPUInfo) int64 {
	if !g.Healthy {
		return -1
	}
	return g.Free()
}

// SharesGPUs reports whether the node is a GPU-sharing node: it has cards or holds gpu-mem.
func (n *NodeInfo) SharesGPUs() bool { return len(n.GPUs) > 0 || n.PendingUnits > 0 }

// TotalUnits is the sum of the cards' capacities.
func (n *NodeInfo) TotalUnits() int64 {
	if n.summed {
		return n.total
	}
	var t int64
	for i := range n.GPUs {
		t += n.GPUs[i].Capacity
	}
	return t
}

// UsedUnits is the units held on cards plus pending units.
func (n *NodeInfo) UsedUnits() int64 {
	if n.summed {
		return n.used
	}
	t := n.PendingUnits
	for i := range n.GPUs {
		t += n.GPUs[i].Used
	}
	return t
}

// GPU returns the card with NVML index idx.
func (n *NodeInfo) GPU(idx int) (*GPUInfo, bool) {
	for i := range n.GPUs {
		if n.GPUs[i].Index == idx {
			return &n.GPUs[i], true
		}
	}
	return nil, false
}

// CheckFit reports why alloc cannot be added to the node for req, or nil when it can.
func (n *NodeInfo) CheckFit(req *contract.PodRequest, alloc contract.Allocation) error {
	if !alloc.Matches(req) {
		return fmt.Errorf("%w: placement %v does not match the pod's request", ErrDoesNotFit, alloc)
	}
	for idx, units := range alloc.PerGPU() {
		g, ok := n.GPU(idx)
		switch {
		case !ok:
			return fmt.Errorf("%w: node %s has no GPU %d", ErrDoesNotFit, n.Name, idx)
		case !g.Healthy:
			return fmt.Errorf("%w: GPU %d of node %s is unhealthy", ErrDoesNotFit, idx, n.Name)
		case !req.AcceptsModel(g.Model):
			return fmt.Errorf("%w: GPU %d of node %s is a %q, the pod accepts %v", ErrDoesNotFit, idx, n.Name, g.Model, req.Models)
		case g.Free() < units:
			return fmt.Errorf("%w: GPU %d of node %s has %d units free, the pod needs %d", ErrDoesNotFit, idx, n.Name, g.Free(), units)
		}
	}
	return nil
}
