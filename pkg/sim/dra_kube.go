package sim

import (
	"container/heap"
	"math"

	"github.com/gpushare/gpushare/pkg/placement"
)

// maxNodeScore is kube-scheduler's fwk.MaxNodeScore.
const maxNodeScore = 100

// KubeScore is kube-scheduler v1.37.1's default score of node for a pod asking res, as far as
// it tells nodes apart for a trace pod whose GPU is a ResourceClaim: NodeResourcesFit's
// LeastAllocated plus NodeResourcesBalancedAllocation, both on CPU and memory with weight 1,
// in integers as kube-scheduler computes them. The other default score plugins rate every node
// alike for such a pod (no taints, affinity, spread constraints, owner or image) and
// DynamicResources scores only claims with firstAvailable subrequests, so they do not change
// which node wins. The trace sets both requests on every pod, zero included, so the requests
// that NodeResourcesFit counts with non-zero defaults are the requests themselves.
func KubeScore(node *placement.NodeInfo, res placement.PodResources) int64 {
	return leastAllocated(node, res) + balancedAllocation(node, res)
}

// leastAllocated is NodeResourcesFit's LeastAllocated score: per resource the unrequested share
// of allocatable after the pod, 0-100 rounded down (0 when over), averaged over the resources
// the node has, rounded down.
func leastAllocated(node *placement.NodeInfo, res placement.PodResources) int64 {
	var sum, weights int64
	for _, r := range [...][2]int64{
		{node.RequestedMilliCPU + res.MilliCPU, node.AllocatableMilliCPU},
		{node.RequestedMemory + res.Memory, node.AllocatableMemory},
	} {
		requested, allocatable := r[0], r[1]
		if allocatable == 0 {
			continue
		}
		weights++
		if requested <= allocatable {
			sum += (allocatable - requested) * maxNodeScore / allocatable
		}
	}
	if weights == 0 {
		return 0
	}
	return sum / weights
}

// balancedAllocation is NodeResourcesBalancedAllocation's score in v1.37: half the scale plus
// half of (half the scale plus the change in balance the pod brings), where balance is
// (1 - the standard deviation of the CPU and memory shares requested) on the 0-100 scale. A pod
// asking neither CPU nor memory is skipped (0 on every node).
func balancedAllocation(node *placement.NodeInfo, res placement.PodResources) int64 {
	if res.MilliCPU == 0 && res.Memory == 0 {
		return 0
	}
	with := balance(node.RequestedMilliCPU+res.MilliCPU, node.AllocatableMilliCPU, node.RequestedMemory+res.Memory, node.AllocatableMemory)
	without := balance(node.RequestedMilliCPU, node.AllocatableMilliCPU, node.RequestedMemory, node.AllocatableMemory)
	return maxNodeScore/2 + (maxNodeScore/2+with-without)/2
}

// balance is (1 - std of the requested shares) x 100 rounded down, shares capped at 1 and taken
// over the resources the node has; the std of two shares is half their difference.
func balance(cpu, cpuAlloc, mem, memAlloc int64) int64 {
	var shares []float64
	for _, r := range [...][2]int64{{cpu, cpuAlloc}, {mem, memAlloc}} {
		if r[1] != 0 {
			shares = append(shares, min(1, float64(r[0])/float64(r[1])))
		}
	}
	std := 0.0
	if len(shares) == 2 {
		std = math.Abs(shares[0]-shares[1]) / 2
	}
	return int64((1 - std) * maxNodeScore)
}

// kubeScheduler chooses nodes as kube-scheduler v1.37.1 does alone, without an extender, for
// pods whose GPU is a DRA claim: its filters (NodeResourcesFit on CPU and memory, and
// DynamicResources, which runs the allocator on the node) over the nodes from where the last
// cycle stopped until it has found its adaptive share of feasible nodes
// (percentageOfNodesToScore unset), KubeScore on them, and the top of a max-heap of the
// scores. Without extenders kube-scheduler gives every node the same tie-breaking Randomizer
// (0), so among equal scores the heap's order decides, which is the order the nodes were
// found in: that is the tie rule here.
type kubeScheduler struct {
	sampler sampler
	sampled []*placement.NodeInfo
	found   scoredNodes
}

// choose returns the node kube-scheduler chooses among nodes for d's pod, or false when no
// node passes its filters.
func (k *kubeScheduler) choose(d *placement.Decision, nodes []*placement.NodeInfo) (*placement.NodeInfo, bool) {
	res, scratch := d.Resources(), &placement.Plan{}
	start := k.sampler.next
	k.sampled = k.sampler.sample(nodes, func(n *placement.NodeInfo) bool {
		return podFits(n, res) && d.Feasible(n, scratch)
	}, k.sampled)
	k.found = k.found[:0]
	for i := range nodes {
		if n := k.sampled[(start+i)%len(nodes)]; n != nil {
			k.found = append(k.found, scoredNode{node: n})
		}
	}
	switch len(k.found) {
	case 0:
		return nil, false
	case 1: // one feasible node: kube-scheduler takes it without scoring
		return k.found[0].node, true
	}
	for i := range k.found {
		k.found[i].score = KubeScore(k.found[i].node, res)
	}
	heap.Init(&k.found)
	return heap.Pop(&k.found).(scoredNode).node, true
}

// scoredNode is a feasible node and its KubeScore.
type scoredNode struct {
	node  *placement.NodeInfo
	score int64
}

// scoredNodes is a max-heap of scores, ties left to the heap as kube-scheduler's
// SortedScoredNodes leaves them when every Randomizer is 0.
type scoredNodes []scoredNode

var _ heap.Interface = (*scoredNodes)(nil)

func (h scoredNodes) Len() int           { return len(h) }
func (h scoredNodes) Less(i, j int) bool { return h[i].score > h[j].score }
func (h scoredNodes) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }

// Push adds x, a scoredNode.
func (h *scoredNodes) Push(x any) { *h = append(*h, x.(scoredNode)) }

// Pop removes and returns the last element.
func (h *scoredNodes) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
