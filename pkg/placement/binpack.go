package placement

import "github.com/gpushare/gpushare/pkg/gpumem"

var (
	_ Policy      = Binpack{}
	_ FreeOrderer = Binpack{}
)

// Binpack fills the fullest cards that fit: tightest card first, and among nodes the one whose
// chosen cards (then the node as a whole) are fullest after placement. It scores every pod
// alike, so it is its own Scorer.
type Binpack struct{}

// BinpackName names Binpack in the policy registry and in --policy.
const BinpackName = "binpack"

// Name is BinpackName.
func (Binpack) Name() string { return BinpackName }

// ForPod returns the policy itself: binpack does not weigh CPU or memory.
func (b Binpack) ForPod(PodResources) Scorer { return b }

// RankGPU ranks the card with the fewest units left after the pod first.
func (Binpack) RankGPU(node *NodeInfo, g int, units int64, _ *gpumem.PodRequest) float64 {
	return float64(node.GPUs[g].Free() - units)
}

// EmptiestFirst is false: the tightest card ranks first.
func (Binpack) EmptiestFirst() bool { return false }

// ScoreNode is how full the plan's cards, then the node, are after placement.
func (Binpack) ScoreNode(node *NodeInfo, plan *Plan, req *gpumem.PodRequest) float64 {
	return fullness(node, plan, req)
}

// fullness is how full the plan's cards are after placement (weight 1) plus how full the node
// is after placement (weight 1/100, a tie-breaker), both as fractions. A card the plan uses fits
// its charge, so at least one unit of it is free and its used units are its capacity less its
// free ones: the compact summaries give them without reading the card's full record.
func fullness(node *NodeInfo, plan *Plan, req *gpumem.PodRequest) float64 {
	free, capacities := node.UsableFree(), node.Capacities()
	var used, capacity, add int64
	if len(plan.Slots) == 1 { // the common plan: its one slot is its charge
		s := plan.Slots[0]
		c := capacities[s.GPU]
		used, capacity, add = c-free[s.GPU]+s.Units, c, s.Units
	}
	for i, s := range plan.Slots {
		if len(plan.Slots) == 1 || !plan.FirstSlotOn(i) {
			continue
		}
		c, charge := capacities[s.GPU], plan.Charge(req, s.GPU)
		used += c - free[s.GPU] + charge
		capacity += c
		add += charge
	}
	cards := 0.0
	if capacity > 0 {
		cards = float64(used) / float64(capacity)
	}
	nodeFull := 0.0
	if t := node.TotalUnits(); t > 0 {
		nodeFull = float64(node.UsedUnits()+add) / float64(t)
	}
	return cards + nodeFull/100
}
