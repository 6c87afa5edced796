package placement

import (
	"cmp"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

// PodState is where a pod is in the cache's state machine (see pkg/cache.Cache).
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
	// FromResourceSlice: the DRA driver's ResourceSlices (the extender's DRA mode).
	FromResourceSlice InventorySource = "resourceslice"
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
	Allocation gpumem.Allocation `json:"allocation,omitempty"`
	// Priority is the pod's priority (spec.priority): preemption evicts only pods of lower
	// priority than the preemptor's.
	Priority int32 `json:"priority,omitempty"`
	// Terminating: the pod is being deleted; it holds its memory until it is gone.
	Terminating bool `json:"terminating,omitempty"`
}

// Key is namespace/name.
func (p *PodInfo) Key() string { return p.Namespace + "/" + p.Name }

// CompareKeys orders a and b as their Keys compare, without building them: snapshots sort
// their pods with it on every change.
func CompareKeys(a, b *PodInfo) int {
	if a.Namespace == b.Namespace {
		return strings.Compare(a.Name, b.Name)
	}
	an, bn := a.Namespace, b.Namespace
	for i := range min(len(an), len(bn)) {
		if an[i] != bn[i] {
			return cmp.Compare(an[i], bn[i])
		}
	}
	// One namespace is a prefix of the other; its "/" meets the longer one's next byte.
	switch {
	case len(an) < len(bn) && bn[len(an)] != '/':
		return cmp.Compare('/', bn[len(an)])
	case len(bn) < len(an) && an[len(bn)] != '/':
		return cmp.Compare(an[len(bn)], '/')
	}
	return strings.Compare(a.Key(), b.Key()) // a "/" in a namespace, which the API refuses
}

// NodeInfo is an immutable snapshot of one GPU-sharing node: the cache builds it, placement
// reads it. Its cards' state is held once, in GPUs; MaxFree, UsableFree, Capacities and the unit
// totals are summaries of it that Summarize computes, kept where a placement pass over many
// nodes reads them in a line or two per node.
type NodeInfo struct {
	// Name is the node's name.
	Name string `json:"name"`
	// ID is a small number the cache gives the node: unique among the cache's nodes, and reused
	// once a node is deleted. Policies keep per-node state in slices indexed by it, and check
	// that the state is for this very snapshot.
	ID int `json:"-"`
	// Inventory says where GPU capacities came from.
	Inventory InventorySource `json:"inventory"`
	// GPUs are the node's cards in index order (the summaries below are what placement passes
	// read; GPUs' records stay in an allocation of their own, which keeps snapshots small).
	GPUs []GPUInfo `json:"gpus"`
	// MaxFree is the largest free block on a healthy card: a one-card ask larger than it cannot
	// fit, whatever the card's model.
	MaxFree int64 `json:"maxFree"`
	// usable is each card's free units, -1 for an unhealthy card (see UsableFree); it lives in
	// usableBuf, right after MaxFree, for nodes of up to maxInlineCards cards, so that choosing a
	// card for a one-card ask reads the node's first two cache lines only.
	usable    []int64
	usableBuf [maxInlineCards]int64
	// capacity is each card's capacity (see Capacities), inline likewise.
	capacity    []int64
	capacityBuf [maxInlineCards]int64
	// summed is true when total and used hold TotalUnits and UsedUnits.
	summed      bool
	total, used int64

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
	// Topology is what joins the node's cards, by positions of GPUs; nil when the node's
	// plugin does not report it (placement then ignores topology, as before it was reported).
	// The node's snapshots share it and nobody modifies it.
	Topology *Topology `json:"-"`
}

// maxInlineCards is how many cards' summaries a snapshot keeps inline.
const maxInlineCards = 8

// SetGPUs sets the node's cards to a copy of gpus (nil for none). Call Summarize once their Used
// fields are final.
func (n *NodeInfo) SetGPUs(gpus []GPUInfo) {
	if len(gpus) == 0 {
		n.GPUs = nil
		return
	}
	n.GPUs = append(make([]GPUInfo, 0, len(gpus)), gpus...)
}

// Summarize fills the summaries of GPUs and PendingUnits: MaxFree, UsableFree and the unit
// totals. The cache does it for every snapshot; code that builds a NodeInfo itself (tests,
// tools) calls it once GPUs are set, as placement reads MaxFree.
func (n *NodeInfo) Summarize() {
	n.MaxFree = 0
	if len(n.GPUs) <= maxInlineCards {
		n.usable, n.capacity = n.usableBuf[:len(n.GPUs)], n.capacityBuf[:len(n.GPUs)]
	} else {
		n.usable, n.capacity = make([]int64, len(n.GPUs)), make([]int64, len(n.GPUs))
	}
	for i := range n.GPUs {
		g := &n.GPUs[i]
		n.usable[i], n.capacity[i] = usableFree(g), g.Capacity
		if g.Healthy {
			n.MaxFree = max(n.MaxFree, g.Free())
		}
	}
	n.summed = false
	n.total, n.used = n.TotalUnits(), n.UsedUnits()
	n.summed = true
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

// Capacities returns each card's capacity in units, in GPUs' order. Callers must not modify the
// result.
func (n *NodeInfo) Capacities() []int64 {
	if n.summed {
		return n.capacity
	}
	out := make([]int64, len(n.GPUs))
	for g := range n.GPUs {
		out[g] = n.GPUs[g].Capacity
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

// CardFits reports whether the card at position g takes units for req: it is healthy, of a
// model req accepts, and has at least units free (with units 0: whether req may use it at
// all). It is the one fit test of a card: the planner, the explanation of a misfit and the
// cache's check of a placement all ask it.
func (n *NodeInfo) CardFits(g int, units int64, req *gpumem.PodRequest) bool {
	var free int64
	if n.summed {
		free = n.usable[g]
	} else {
		free = usableFree(&n.GPUs[g])
	}
	return free >= units && (len(req.Models) == 0 || req.AcceptsModel(n.GPUs[g].Model))
}

// topology is the node's Topology when it covers exactly its cards, else nil.
func (n *NodeInfo) topology() *Topology {
	if n.Topology == nil || n.Topology.Cards() != len(n.GPUs) {
		return nil
	}
	return n.Topology
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

// Position returns the position in GPUs of the card with NVML index idx.
func (n *NodeInfo) Position(idx int) (int, bool) {
	for i := range n.GPUs {
		if n.GPUs[i].Index == idx {
			return i, true
		}
	}
	return -1, false
}

// CheckFit reports why alloc cannot be added to the node for req, or nil when it can.
func (n *NodeInfo) CheckFit(req *gpumem.PodRequest, alloc gpumem.Allocation) error {
	if !alloc.Matches(req) {
		return fmt.Errorf("%w: placement %v does not match the pod's request", ErrDoesNotFit, alloc)
	}
	for idx, units := range alloc.PerGPU() {
		g, ok := n.Position(idx)
		if !ok {
			return fmt.Errorf("%w: node %s has no GPU %d", ErrDoesNotFit, n.Name, idx)
		}
		if n.CardFits(g, units, req) {
			continue
		}
		switch gpu := &n.GPUs[g]; {
		case !gpu.Healthy:
			return fmt.Errorf("%w: GPU %d of node %s is unhealthy", ErrDoesNotFit, idx, n.Name)
		case !req.AcceptsModel(gpu.Model):
			return fmt.Errorf("%w: GPU %d of node %s is a %q, the pod accepts %v", ErrDoesNotFit, idx, n.Name, gpu.Model, req.Models)
		default:
			return fmt.Errorf("%w: GPU %d of node %s has %d units free, the pod needs %d", ErrDoesNotFit, idx, n.Name, gpu.Free(), units)
		}
	}
	return nil
}
