package placement

import (
	"cmp"
	"slices"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

// CardOrder is the order in which a DRA driver publishes a node's cards in its ResourceSlice.
// kube-scheduler's allocator (k8s.io/dynamic-resource-allocation/structured) walks pools by ID,
// slices by name and devices in the order published, and takes the first cards that fit: the
// order is the only say the node's driver has in which card a claim gets.
type CardOrder string

// The card orders a driver may publish in.
const (
	// CardOrderIndex publishes the cards in the order of NodeInfo.GPUs: by NVML index, as
	// drivers do, or, for a node read from its ResourceSlices, as published.
	CardOrderIndex CardOrder = "index"
	// CardOrderTightest publishes the card with the least free memory (the most allocated)
	// first, lowest index on ties, republished whenever an allocation changes it: first-fit in
	// it is best-fit.
	CardOrderTightest CardOrder = "tightest"
	// CardOrderEmptiest publishes the card with the most free memory first, lowest index on
	// ties: first-fit in it is worst-fit.
	CardOrderEmptiest CardOrder = "emptiest"
)

// CardOrders lists every card order.
func CardOrders() []CardOrder {
	return []CardOrder{CardOrderIndex, CardOrderTightest, CardOrderEmptiest}
}

// key is where card g of node stands in the published order: lower first, the lowest position
// first among equal keys.
func (o CardOrder) key(node *NodeInfo, g int) float64 {
	switch o {
	case CardOrderTightest:
		return float64(node.UsableFree()[g])
	case CardOrderEmptiest:
		return -float64(node.UsableFree()[g])
	}
	return float64(g)
}

// Published returns the positions of node's cards (in NodeInfo.GPUs) in the order the driver
// publishes them.
func (o CardOrder) Published(node *NodeInfo) []int {
	out := make([]int, len(node.GPUs))
	for g := range out {
		out[g] = g
	}
	slices.SortStableFunc(out, func(a, b int) int { return cmp.Compare(o.key(node, a), o.key(node, b)) })
	return out
}

// FirstFit is the allocator's answer to a claim for count distinct cards with units of memory
// on each (a ResourceClaim request `count: N, capacity: {requests: {memory: X}}` on devices
// with allowMultipleAllocations): the first count cards of node, in the order published, that
// fit (healthy, a model req accepts, units free), in that order; ok is false when fewer fit.
// The allocator backtracks only when a later request or constraint fails, and a claim of one
// request has none, so its first solution is this one.
func FirstFit(node *NodeInfo, order CardOrder, units int64, count int, req *gpumem.PodRequest) (cards []int, ok bool) {
	for _, g := range order.Published(node) {
		if len(cards) == count {
			break
		}
		if node.CardFits(g, units, req) {
			cards = append(cards, g)
		}
	}
	return cards, len(cards) == count
}

// PredictFirstFit returns a Policy whose scorer plans a pod's cards as kube-scheduler's
// allocator chooses them under DRA (the first cards that fit in order), and rates a node with
// inner's score of that plan: a node chosen knowing which card the allocator will take on it.
// With a nil inner every node rates 0 (the allocator alone, on a node someone else chose).
func PredictFirstFit(inner Policy, order CardOrder) Policy {
	return firstFit{inner: inner, order: order}
}

// firstFit is PredictFirstFit's policy.
type firstFit struct {
	inner Policy
	order CardOrder
}

var _ Policy = firstFit{}

// Name is the inner policy's name.
func (f firstFit) Name() string {
	if f.inner == nil {
		return "first-fit"
	}
	return f.inner.Name()
}

// ForPod wraps the inner policy's scorer for the pod.
func (f firstFit) ForPod(res PodResources) Scorer {
	s := &firstFitScorer{order: f.order}
	if f.inner != nil {
		s.inner = f.inner.ForPod(res)
	}
	return s
}

// firstFitScorer ranks cards by the published order and scores nodes with the inner scorer.
// It offers none of the planning shortcuts (FreeOrderer, CardPicker), so the planner ranks
// every card through RankGPU: the one-card plan is the first fitting card, and a container
// on k cards takes the first k that fit, as FirstFit.
type firstFitScorer struct {
	inner Scorer
	order CardOrder
}

// RankGPU is card g's place in the published order.
func (s *firstFitScorer) RankGPU(node *NodeInfo, g int, _ int64, _ *gpumem.PodRequest) float64 {
	return s.order.key(node, g)
}

// ScoreNode is the inner scorer's rating of node with plan, 0 without one.
func (s *firstFitScorer) ScoreNode(node *NodeInfo, plan *Plan, req *gpumem.PodRequest) float64 {
	if s.inner == nil {
		return 0
	}
	return s.inner.ScoreNode(node, plan, req)
}
