package cache

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

// ClaimCharge is what one allocated ResourceClaim holds in DRA mode: the memory one container
// of a pod consumes on the cards of a node, as kube-scheduler's allocator chose them.
type ClaimCharge struct {
	// Namespace, Name and UID identify the pod the claim is reserved for.
	Namespace string
	// Name is the pod's name.
	Name string
	// UID is the pod's UID; the claims of one pod make up its placement.
	UID types.UID
	// Node is the node whose cards the claim holds (the pool the allocator took them from).
	Node string
	// Container is the key of the claim's container in the pod's placement (the contract's "0",
	// "init-0", …).
	Container string
	// PerGPU is the units the claim consumes on each card, by NVML index.
	PerGPU map[int]int64
}

// units is the claim's total.
func (c *ClaimCharge) units() int64 {
	var sum int64
	for _, u := range c.PerGPU {
		sum += u
	}
	return sum
}

func (c *cacheImpl) SetDRACards(name string, gpus []placement.GPUInfo) {
	gpus = append([]placement.GPUInfo(nil), gpus...)
	c.mu.Lock()
	defer c.mu.Unlock()
	ns := c.nodeLocked(name)
	ns.draGPUs, ns.dra = gpus, true
	c.refreshLocked(ns)
}

func (c *cacheImpl) RemoveDRACards(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ns, ok := c.nodes[name]
	if !ok || !ns.dra {
		return
	}
	ns.draGPUs, ns.dra = nil, false
	c.forgetIfEmptyLocked(ns)
}

func (c *cacheImpl) SetClaim(uid types.UID, charge ClaimCharge) {
	charge.PerGPU = clonePerGPU(charge.PerGPU)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeClaimLocked(uid)
	if c.claims == nil {
		c.claims = map[types.UID]*ClaimCharge{}
	}
	c.claims[uid] = &charge
	ns := c.nodeLocked(charge.Node)
	if ns.claims == nil {
		ns.claims = map[types.UID]*ClaimCharge{}
	}
	ns.claims[uid] = &charge
	c.refreshLocked(ns)
}

func (c *cacheImpl) RemoveClaim(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeClaimLocked(uid)
}

// removeClaimLocked releases a claim's charge, if any. Caller holds c.mu for writing.
func (c *cacheImpl) removeClaimLocked(uid types.UID) {
	old, ok := c.claims[uid]
	if !ok {
		return
	}
	delete(c.claims, uid)
	ns, ok := c.nodes[old.Node]
	if !ok {
		return
	}
	delete(ns.claims, uid)
	c.forgetIfEmptyLocked(ns)
}

// forgetIfEmptyLocked drops a node the cache has no Node object, cards or charges for, and
// refreshes it otherwise. Caller holds c.mu for writing.
func (c *cacheImpl) forgetIfEmptyLocked(ns *nodeState) {
	if !ns.seen && !ns.dra && len(ns.pods) == 0 && len(ns.claims) == 0 {
		delete(c.nodes, ns.name)
		return
	}
	c.refreshLocked(ns)
}

// clonePerGPU copies a claim's per-card units, so that the caller's map is not shared.
func clonePerGPU(m map[int]int64) map[int]int64 {
	out := make(map[int]int64, len(m))
	for g, u := range m {
		out[g] = u
	}
	return out
}

// chargeClaims adds the claims of a DRA node to n, one PodInfo per pod (its claims are its
// containers' placements), leaving out the pods in skip. Caller holds the cache lock.
func chargeClaims(n *placement.NodeInfo, ns *nodeState, skip map[types.UID]bool) {
	if len(ns.claims) == 0 {
		return
	}
	byPod := map[types.UID]*placement.PodInfo{}
	for _, cl := range ns.claims {
		if skip[cl.UID] {
			continue
		}
		p, ok := byPod[cl.UID]
		if !ok {
			p = &placement.PodInfo{Namespace: cl.Namespace, Name: cl.Name, UID: cl.UID, Node: ns.name,
				State: placement.PodBound, Allocation: gpumem.Allocation{}}
			if ps, found := ns.pods[cl.UID]; found { // the pod feed knows its CPU and priority
				p.MilliCPU, p.Priority, p.Terminating = ps.info.MilliCPU, ps.info.Priority, ps.info.Terminating
			}
			byPod[cl.UID] = p
		}
		p.Units += cl.units()
		p.Allocation[cl.Container] = cl.PerGPU
		for g, u := range cl.PerGPU {
			if i, found := gpuPosition(n.GPUs, g); found {
				n.GPUs[i].Used += u
			} else {
				n.PendingUnits += u
			}
		}
	}
	for _, p := range byPod {
		n.Pods = append(n.Pods, *p)
	}
}
