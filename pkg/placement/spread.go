package placement

import "github.com/gpushare/gpushare/pkg/gpumem"

var (
	_ Policy      = Spread{}
	_ FreeOrderer = Spread{}
)

// Spread puts pods on the emptiest cards and nodes. It scores every pod alike, so it is its
// own Scorer.
type Spread struct{}

// SpreadName names Spread in the policy registry and in --policy.
const SpreadName = "spread"

// Name is SpreadName.
func (Spread) Name() string { return SpreadName }

// ForPod returns the policy itself: spread does not weigh CPU or memory.
func (s Spread) ForPod(PodResources) Scorer { return s }

// RankGPU ranks the card with the most units left after the pod first.
func (Spread) RankGPU(node *NodeInfo, g int, units int64, _ *gpumem.PodRequest) float64 {
	return -float64(node.GPUs[g].Free() - units)
}

// EmptiestFirst is true: the emptiest card ranks first.
func (Spread) EmptiestFirst() bool { return true }

// ScoreNode prefers the node whose plan's cards, then the node, stay emptiest.
func (Spread) ScoreNode(node *NodeInfo, plan *Plan, req *gpumem.PodRequest) float64 {
	return -fullness(node, plan, req)
}
