package sim

import "github.com/gpushare/gpushare/pkg/placement"

// kube-scheduler's bounds on how many feasible nodes it looks for (pkg/scheduler/schedule_one.go,
// minFeasibleNodesToFind and minFeasibleNodesPercentageToFind).
const (
	minFeasibleNodesToFind           = 100
	minFeasibleNodesPercentageToFind = 5
)

// sampler models which nodes kube-scheduler hands the extender: it runs its own filters over
// the nodes starting where the previous scheduling cycle stopped, keeps the first feasible
// ones until it has numFeasibleNodesToFind of them, and moves its start past every node it
// looked at. kube-scheduler checks nodes in 16 goroutines, so the nodes it keeps are the first
// feasible ones give or take the nodes in flight when it stops; the model takes exactly the
// first. Nodes are in the order kube-scheduler learned them, the trace's order when nodes are
// created one at a time (bench-replay does).
type sampler struct {
	// percentage is percentageOfNodesToScore; 0 is kube-scheduler's adaptive default.
	percentage int
	// next is the index where the next cycle starts (nextStartNodeIndex).
	next int
}

// numFeasibleNodesToFind is how many feasible nodes kube-scheduler looks for among n nodes.
func (s *sampler) numFeasibleNodesToFind(n int) int {
	if n < minFeasibleNodesToFind {
		return n
	}
	p := s.percentage
	if p == 0 {
		p = max(50-n/125, minFeasibleNodesPercentageToFind)
	}
	return max(n*p/100, minFeasibleNodesToFind)
}

// sample returns the nodes kube-scheduler would pass to the extender for a pod that fits where
// fits says (its NodeResourcesFit): nodes with the others set to nil, so that indices keep
// naming the same nodes. out is reused.
func (s *sampler) sample(nodes []*placement.NodeInfo, fits func(*placement.NodeInfo) bool, out []*placement.NodeInfo) []*placement.NodeInfo {
	n := len(nodes)
	out = append(out[:0], make([]*placement.NodeInfo, n)...)
	if n == 0 {
		return out
	}
	want, found, processed := s.numFeasibleNodesToFind(n), 0, 0
	for ; processed < n && found < want; processed++ {
		i := (s.next + processed) % n
		if nodes[i] != nil && fits(nodes[i]) {
			out[i] = nodes[i]
			found++
		}
	}
	s.next = (s.next + processed) % n
	return out
}

// kubeFits is kube-scheduler's NodeResourcesFit for the pod: CPU, memory, and gpu-mem as an
// extended resource counted over the whole node (the extender checks the cards).
func kubeFits(n *placement.NodeInfo, res placement.PodResources, units int64) bool {
	return podFits(n, res) && (units == 0 || n.TotalUnits()-n.UsedUnits() >= units)
}
