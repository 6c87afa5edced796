package scheduler

import (
	"fmt"
	"sort"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
)

// Policy decides which cards a pod prefers on a node and how good a node is. The extender's
// prioritize and bind and the trace simulator call the same Policy.
type Policy interface {
	// Name is the policy's flag value.
	Name() string
	// RankGPU is the sort key for putting units on GPU position g of node; cards with lower
	// keys are tried first. Only cards that fit are ranked.
	RankGPU(node *cache.NodeInfo, g int, units int64, req *contract.PodRequest) float64
	// ScoreNode rates node with plan applied; higher is better. Scores of different nodes for
	// the same pod are compared with each other only.
	ScoreNode(node *cache.NodeInfo, plan *Plan, req *contract.PodRequest) float64
}

// DefaultPolicy is the policy the extender and the simulator use unless told otherwise.
const DefaultPolicy = "fgd-online"

// PolicyFactory builds a policy.
type PolicyFactory func() Policy

// Policies maps policy names to factories; NewPolicies returns the built-in ones.
type Policies map[string]PolicyFactory

// NewPolicies returns the built-in policies.
func NewPolicies() Policies {
	return Policies{
		"binpack":    func() Policy { return binpack{} },
		"spread":     func() Policy { return spread{} },
		"random":     func() Policy { return newRandom(1) },
		"fgd":        func() Policy { return newFGD() },
		"fgd-online": func() Policy { return newFGDOnline() },
	}
}

// New builds the named policy.
func (p Policies) New(name string) (Policy, error) {
	f, ok := p[name]
	if !ok {
		return nil, fmt.Errorf("unknown policy %q (known: %v)", name, p.Names())
	}
	return f(), nil
}

// Names lists the known policy names, sorted.
func (p Policies) Names() []string {
	out := make([]string, 0, len(p))
	for n := range p {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// freeOrderer is implemented by policies whose RankGPU orders a node's cards by their free
// units alone: ascending (tightest first) or, when emptiestFirst, descending. Planning then
// compares free units directly instead of calling RankGPU for every card.
type freeOrderer interface {
	emptiestFirst() bool
}

// binpack fills the fullest cards that fit: tightest card first, and among nodes the one whose
// chosen cards (then the node as a whole) are fullest after placement.
type binpack struct{}

func (binpack) Name() string { return "binpack" }

func (binpack) RankGPU(node *cache.NodeInfo, g int, units int64, _ *contract.PodRequest) float64 {
	return float64(node.Card(g).Free - units)
}

func (binpack) emptiestFirst() bool { return false }

func (binpack) ScoreNode(node *cache.NodeInfo, plan *Plan, req *contract.PodRequest) float64 {
	return fullness(node, plan, req)
}

// spread puts pods on the emptiest cards and nodes.
type spread struct{}

func (spread) Name() string { return "spread" }

func (spread) RankGPU(node *cache.NodeInfo, g int, units int64, _ *contract.PodRequest) float64 {
	return -float64(node.Card(g).Free - units)
}

func (spread) emptiestFirst() bool { return true }

func (spread) ScoreNode(node *cache.NodeInfo, plan *Plan, req *contract.PodRequest) float64 {
	return -fullness(node, plan, req)
}

// fullness is how full the plan's cards are after placement (weight 1) plus how full the node
// is after placement (weight 1/100, a tie-breaker), both as fractions.
func fullness(node *cache.NodeInfo, plan *Plan, req *contract.PodRequest) float64 {
	var used, capacity, add int64
	if len(plan.Slots) == 1 { // the common plan: its one slot is its charge
		s := plan.Slots[0]
		card := node.Card(s.GPU)
		used, capacity, add = card.Used+s.Units, card.Capacity, s.Units
	}
	for i, s := range plan.Slots {
		if len(plan.Slots) == 1 || !plan.FirstSlotOn(i) {
			continue
		}
		card, c := node.Card(s.GPU), plan.Charge(req, s.GPU)
		used += card.Used + c
		capacity += card.Capacity
		add += c
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
