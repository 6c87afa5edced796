package cache

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

var _ Cache = (*cacheImpl)(nil)

// cacheImpl is the only Cache implementation.
type cacheImpl struct {
	names  contract.Names
	logger klog.Logger

	// mu guards nodes, snaps, pods, claims and ids. Snapshots are replaced, never mutated.
	mu     sync.RWMutex
	nodes  map[string]*nodeState
	snaps  map[string]*placement.NodeInfo // nodes[n].snap of every listed node, for lookups by name
	pods   map[types.UID]*podState
	claims map[types.UID]*ClaimCharge // DRA mode: allocated claims by claim UID
	ids    idPool
	// allocations shares decoded placements between bound pods (own lock).
	allocations allocationTable
	// deferred makes changes mark their node stale instead of building its snapshot: a cache
	// filled from a whole listing at once (the audit's truth) builds each snapshot once, in
	// settle, not once per pod.
	deferred bool
}

// nodeState is what the cache knows of a node. A node is listed only once its Node object has
// been seen (node != nil); pods may arrive first.
type nodeState struct {
	name      string
	seen      bool
	id        int // NodeInfo.ID, while seen
	inventory placement.InventorySource
	gpus      []placement.GPUInfo // capacity, model, health; Used is 0 here
	topology  *placement.Topology // what joins gpus, nil without; shared by the snapshots
	cpu, mem  int64
	pods      map[types.UID]*podState
	// dra is set while the node's cards come from its ResourceSlices (draGPUs, in the order
	// published), which then replace gpus; claims are the allocated claims on its cards.
	dra     bool
	draGPUs []placement.GPUInfo
	claims  map[types.UID]*ClaimCharge
	snap    *placement.NodeInfo
	stale   bool // changed since snap was built, in a deferred cache
}

// podState is one pod on a node; every pod with a node is tracked (for CPU and memory), and
// those asking gpu-mem appear in the node's snapshot.
type podState struct {
	info     placement.PodInfo
	perGPU   map[int]int64
	cpu, mem int64
}

// New returns an empty cache for the given contract names.
func New(names contract.Names, logger klog.Logger) Cache {
	return &cacheImpl{
		names:  names,
		logger: logger,
		nodes:  map[string]*nodeState{},
		snaps:  map[string]*placement.NodeInfo{},
		pods:   map[types.UID]*podState{},
	}
}

func (c *cacheImpl) SetNode(node *v1.Node) {
	inv, err := inventoryOf(node, &c.names)
	switch {
	case errors.Is(err, contract.ErrInvalidTopology):
		c.logger.Error(err, "Node's GPU topology ignored: its cards are used without it", "node", klog.KObj(node), "gpus", len(inv.gpus))
	case err != nil:
		c.logger.Error(err, "Node's GPU inventory refused in part: see the error for what was used instead", "node", klog.KObj(node), "gpus", len(inv.gpus))
	case inv.source == placement.FromEvenSplit && len(inv.gpus) > 0:
		c.logger.V(4).Info("Node has no GPU annotation, splitting gpu-mem evenly over gpu-count", "node", klog.KObj(node))
	}
	alloc := node.Status.Allocatable
	c.mu.Lock()
	defer c.mu.Unlock()
	ns := c.nodeLocked(node.Name)
	if !ns.seen {
		ns.id = c.ids.take()
	}
	ns.seen, ns.gpus, ns.inventory = true, inv.gpus, inv.source
	if !ns.topology.Equal(inv.topology) { // an unchanged topology keeps its pointer
		ns.topology = inv.topology
	}
	ns.cpu, ns.mem = alloc.Cpu().MilliValue(), alloc.Memory().Value()
	c.refreshLocked(ns)
}

func (c *cacheImpl) RemoveNode(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ns, ok := c.nodes[name]
	if !ok {
		return
	}
	if ns.seen {
		c.ids.give(ns.id)
	}
	ns.seen, ns.gpus, ns.topology, ns.snap = false, nil, nil, nil
	delete(c.snaps, name)
	if len(ns.pods) == 0 && len(ns.claims) == 0 && !ns.dra {
		delete(c.nodes, name)
	}
}

// nodeLocked returns the state of a node, creating it. Caller holds c.mu for writing.
func (c *cacheImpl) nodeLocked(name string) *nodeState {
	ns, ok := c.nodes[name]
	if !ok {
		ns = &nodeState{name: name, pods: map[types.UID]*podState{}}
		c.nodes[name] = ns
	}
	return ns
}

func (c *cacheImpl) SetPod(pod *v1.Pod) {
	if pod.Spec.NodeName == "" {
		return // not bound: an in-flight assumption stays as it is
	}
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		c.RemovePod(pod)
		return
	}
	ps := c.podStateOf(pod)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.pods[pod.UID]; ok {
		if old.info.State == placement.PodAssumed && old.info.Node == ps.info.Node && ps.info.Allocation == nil {
			ps.info.Allocation, ps.perGPU = old.info.Allocation, old.perGPU
		}
		c.removeLocked(old)
	}
	c.addLocked(ps)
}

// podStateOf reads what a bound pod holds. Malformed requests or placements are logged and the
// pod then holds no gpu-mem or pending units respectively; the pod is never dropped.
func (c *cacheImpl) podStateOf(pod *v1.Pod) *podState {
	ps := &podState{info: placement.PodInfo{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Node: pod.Spec.NodeName, State: placement.PodBound,
		Priority: PodPriority(pod), Terminating: pod.DeletionTimestamp != nil}}
	ps.cpu, ps.mem = contract.PodCPUMemory(pod)
	ps.info.MilliCPU = ps.cpu
	req, err := contract.ParseRequest(pod, &c.names)
	if err != nil {
		c.logger.Info("Bound pod has an invalid gpu-mem request; not charging GPU memory", "pod", klog.KObj(pod), "err", err)
		return ps
	}
	ps.info.Units = req.TotalUnits()
	if req.Empty() {
		return ps
	}
	alloc, perGPU, ok, err := c.allocations.fromPod(pod, &req)
	switch {
	case err != nil:
		c.logger.Info("Pod placement annotation unusable; counting its memory as pending on the node", "pod", klog.KObj(pod), "err", err)
	case ok && !alloc.Matches(&req):
		c.logger.Info("Pod placement does not match its request; counting its memory as pending on the node", "pod", klog.KObj(pod))
	case ok:
		ps.info.Allocation, ps.perGPU = alloc, perGPU
	}
	return ps
}

// PodPriority is the pod's priority, 0 without one (as kube-scheduler counts it).
func PodPriority(pod *v1.Pod) int32 {
	if pod.Spec.Priority != nil {
		return *pod.Spec.Priority
	}
	return 0
}

func (c *cacheImpl) RemovePod(pod *v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.pods[pod.UID]; ok {
		c.removeLocked(old)
	}
}

func (c *cacheImpl) AssumePod(pod *v1.Pod, req *contract.PodRequest, nodeName string, alloc contract.Allocation) (contract.Allocation, error) {
	cpu, mem := contract.PodCPUMemory(pod)
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.pods[pod.UID]; ok {
		if old.info.Node != nodeName {
			return nil, fmt.Errorf("%w: pod %s is %s on node %s", ErrPodOnOtherNode, klog.KObj(pod), old.info.State, old.info.Node)
		}
		if old.info.Allocation != nil {
			return old.info.Allocation.Clone(), nil
		}
	}
	ns, ok := c.nodes[nodeName]
	if !ok || !ns.seen {
		return nil, fmt.Errorf("%w: %s", ErrUnknownNode, nodeName)
	}
	if err := ns.snap.CheckFit(req, alloc); err != nil {
		return nil, err
	}
	if old, ok := c.pods[pod.UID]; ok {
		c.removeLocked(old) // bound without placement so far: the new placement replaces it
	}
	c.addLocked(&podState{
		info: placement.PodInfo{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Node: nodeName,
			State: placement.PodAssumed, Units: req.TotalUnits(), MilliCPU: cpu, Allocation: alloc.Clone(), Priority: PodPriority(pod)},
		perGPU: alloc.PerGPU(), cpu: cpu, mem: mem,
	})
	return alloc.Clone(), nil
}

func (c *cacheImpl) ForgetPod(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.pods[uid]; ok && old.info.State == placement.PodAssumed {
		c.removeLocked(old)
	}
}

func (c *cacheImpl) Pod(uid types.UID) (placement.PodInfo, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ps, ok := c.pods[uid]
	if !ok {
		return placement.PodInfo{}, false
	}
	info := ps.info
	if info.Allocation != nil {
		info.Allocation = info.Allocation.Clone()
	}
	return info, true
}

// addLocked records ps on its node. Caller holds c.mu for writing.
func (c *cacheImpl) addLocked(ps *podState) {
	c.pods[ps.info.UID] = ps
	ns := c.nodeLocked(ps.info.Node)
	ns.pods[ps.info.UID] = ps
	c.refreshLocked(ns)
}

// removeLocked forgets ps. Caller holds c.mu for writing.
func (c *cacheImpl) removeLocked(ps *podState) {
	delete(c.pods, ps.info.UID)
	ns, ok := c.nodes[ps.info.Node]
	if !ok {
		return
	}
	delete(ns.pods, ps.info.UID)
	c.forgetIfEmptyLocked(ns)
}

func (c *cacheImpl) Node(name string) (*placement.NodeInfo, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ns, ok := c.nodes[name]
	if !ok || ns.snap == nil {
		return nil, false
	}
	return ns.snap, true
}

func (c *cacheImpl) NodeWithout(name string, uids []types.UID) (*placement.NodeInfo, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ns, ok := c.nodes[name]
	if !ok || ns.snap == nil {
		return nil, false
	}
	skip := make(map[types.UID]bool, len(uids))
	for _, u := range uids {
		skip[u] = true
	}
	return buildSnapshot(ns, skip), true
}

func (c *cacheImpl) Lookup(names []string) []*placement.NodeInfo {
	out := make([]*placement.NodeInfo, len(names))
	c.mu.RLock()
	defer c.mu.RUnlock()
	for i, name := range names {
		out[i] = c.snaps[name]
	}
	return out
}

// visitBatch is how many snapshots Visit takes under one read lock.
const visitBatch = 64

func (c *cacheImpl) Visit(names []string, visit func(i int, node *placement.NodeInfo)) {
	var batch [visitBatch]*placement.NodeInfo // on the stack: no write barrier, nothing to clear
	for lo := 0; lo < len(names); lo += visitBatch {
		part := names[lo:min(lo+visitBatch, len(names))]
		c.mu.RLock()
		for i, name := range part {
			batch[i] = c.snaps[name]
		}
		c.mu.RUnlock()
		for i, node := range batch[:len(part)] {
			visit(lo+i, node)
		}
	}
}

func (c *cacheImpl) Nodes() []*placement.NodeInfo {
	c.mu.RLock()
	out := make([]*placement.NodeInfo, 0, len(c.nodes))
	for _, ns := range c.nodes {
		if ns.snap != nil {
			out = append(out, ns.snap)
		}
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// refreshLocked replaces a node's snapshot. Caller holds c.mu for writing.
func (c *cacheImpl) refreshLocked(ns *nodeState) {
	if c.deferred {
		ns.stale = true
		return
	}
	if !ns.seen {
		ns.snap = nil
		delete(c.snaps, ns.name)
		return
	}
	ns.snap = buildSnapshot(ns, nil)
	c.snaps[ns.name] = ns.snap
}

// newDeferred returns an empty cache that builds its snapshots only when settled: for a cache
// filled at once from a listing and then read (the audit's truth).
func newDeferred(names contract.Names, logger klog.Logger) *cacheImpl {
	c, _ := New(names, logger).(*cacheImpl)
	c.deferred = true
	return c
}

// settle builds the snapshot of every node changed since the cache was made deferred, and makes
// it build them on every change from then on.
func (c *cacheImpl) settle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deferred = false
	for _, ns := range c.nodes {
		if ns.stale {
			ns.stale = false
			c.refreshLocked(ns)
		}
	}
}
