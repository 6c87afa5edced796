package placement

import (
	"cmp"
	"slices"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

// Preemption frees one card for a pod that fits none: it evicts pods of lower priority from
// that card only, choosing the card and the pods that cost least (PreemptionPlan.Compare). The
// pod's memory must then fit on the card once those pods are gone. It covers pods of one
// container on one card, the shape of nearly every shared-GPU pod; a pod spanning several
// cards or containers does not preempt (PreemptionUnsupported).

// VictimInfo is what the planner must know of a pod on the node beyond its PodInfo.
type VictimInfo struct {
	// Priority is the pod's priority (spec.priority).
	Priority int32
	// Terminating: the pod is already being deleted; its memory is freed without an eviction.
	Terminating bool
	// Protected: the pod may not be evicted (it is gone from the API, or the caller excludes
	// it); it keeps its memory.
	Protected bool
}

// PreemptionPlan evicts Victims from the card at position GPU of Node so that the pod fits there.
type PreemptionPlan struct {
	// Node is the node's name; GPU the card's position in its GPUs, Index its NVML index.
	Node       string
	GPU, Index int
	// Victims are the pods to evict, largest first; Waiting the pods already terminating on
	// the card whose memory the pod also waits for.
	Victims, Waiting []PodInfo
	// Units is what the victims free on the card; Need what the pod asks.
	Units, Need int64
	// MaxPriority and SumPriority are over the victims.
	MaxPriority int32
	SumPriority int64
}

// Compare orders plans by cost: fewer victims, then a lower highest priority among them, then
// a lower sum of their priorities, then less memory evicted; then by node name and card, so
// that the choice is the same on every replica.
func (p *PreemptionPlan) Compare(q *PreemptionPlan) int {
	return cmp.Or(cmp.Compare(len(p.Victims), len(q.Victims)), cmp.Compare(p.MaxPriority, q.MaxPriority),
		cmp.Compare(p.SumPriority, q.SumPriority), cmp.Compare(p.Units, q.Units),
		cmp.Compare(p.Node, q.Node), cmp.Compare(p.GPU, q.GPU))
}

// PreemptionUnsupported reports whether req's shape is one preemption does not plan for: more
// than one container asking gpu-mem, or one spanning several cards.
func PreemptionUnsupported(req *gpumem.PodRequest) bool {
	return len(req.Containers) != 1 || req.Containers[0].GPUs != 1
}

// maxVictimCombinations bounds the subsets of a card's pods tried for one card; past it the
// cheapest-first greedy choice stands.
const maxVictimCombinations = 20000

// PlanPreemption is the cheapest way to fit req on one card of node by evicting pods of lower
// priority than priority from that card: false when no card can be freed (no card of the
// pod's model large enough, or too little held there by lower-priority pods). info says each
// pod's priority and whether it is terminating or protected. A card's Used may exceed its
// Capacity (a caller's view counting units held for other pods as used): the plan then frees
// the excess too.
func PlanPreemption(node *NodeInfo, req *gpumem.PodRequest, priority int32, info func(*PodInfo) VictimInfo) (PreemptionPlan, bool) {
	var best PreemptionPlan
	found := false
	if PreemptionUnsupported(req) {
		return best, false
	}
	need := req.Containers[0].Units
	for g := range node.GPUs {
		card := &node.GPUs[g]
		if !card.Healthy || card.Capacity < need || (len(req.Models) > 0 && !req.AcceptsModel(card.Model)) {
			continue
		}
		free, candidates, waiting := onCard(node, card.Index, priority, info)
		// free is not card.Free(): a caller's view may count more held than the card has (other
		// pods' preemption holds over terminating pods), and clamping that at 0 would hand the
		// same terminating memory to every later preemptor.
		free += card.Capacity - card.Used
		deficit := need - free
		if deficit <= 0 && len(waiting) == 0 {
			continue // fits now: the caller did not need to preempt here
		}
		cardBest, ok := cheapestOnCard(PreemptionPlan{Node: node.Name, GPU: g, Index: card.Index, Need: need}, deficit, candidates, waiting)
		if ok && (!found || cardBest.Compare(&best) < 0) {
			best, found = cardBest, true
		}
	}
	return best, found
}

// heldOnCard is a pod's memory on the card being planned.
type heldOnCard struct {
	pod   *PodInfo
	units int64
	vi    VictimInfo
}

// onCard sorts the pods holding memory on the card of NVML index idx: the units the
// terminating ones free (waiting for them), and the candidate victims (lower priority, not
// protected), largest first, which reach a deficit with the fewest victims.
func onCard(node *NodeInfo, idx int, priority int32, info func(*PodInfo) VictimInfo) (freed int64, candidates, waiting []heldOnCard) {
	for i := range node.Pods {
		p := &node.Pods[i]
		units := p.Allocation.PerGPU()[idx]
		if units == 0 {
			continue
		}
		vi := info(p)
		switch {
		case vi.Terminating:
			freed += units
			waiting = append(waiting, heldOnCard{pod: p, units: units, vi: vi})
		case !vi.Protected && vi.Priority < priority:
			candidates = append(candidates, heldOnCard{pod: p, units: units, vi: vi})
		}
	}
	slices.SortFunc(candidates, func(a, b heldOnCard) int {
		return cmp.Or(cmp.Compare(b.units, a.units), cmp.Compare(a.vi.Priority, b.vi.Priority), CompareKeys(a.pod, b.pod))
	})
	return freed, candidates, waiting
}

// cheapestOnCard is the cheapest plan (Compare) that frees deficit units on base's card with the
// fewest of candidates (sorted by onCard); false when all of them do not free enough.
func cheapestOnCard(base PreemptionPlan, deficit int64, candidates, waiting []heldOnCard) (PreemptionPlan, bool) {
	k, sum := 0, int64(0) // with deficit <= 0, no victims: the pod waits for the terminating ones
	for k < len(candidates) && sum < deficit {
		sum += candidates[k].units
		k++
	}
	if sum < deficit {
		return PreemptionPlan{}, false
	}
	for _, w := range waiting {
		base.Waiting = append(base.Waiting, *w.pod)
	}
	plan := func(set []int) PreemptionPlan {
		p := base
		for _, i := range set {
			c := candidates[i]
			p.Victims = append(p.Victims, *c.pod)
			p.Units += c.units
			if len(p.Victims) == 1 || c.vi.Priority > p.MaxPriority {
				p.MaxPriority = c.vi.Priority
			}
			p.SumPriority += int64(c.vi.Priority)
		}
		return p
	}
	set := make([]int, k)
	for i := range set {
		set[i] = i
	}
	best := plan(set)
	// Of the sets of k pods that free enough, the cheapest; an exhaustive search over the
	// card's candidates, bounded. Every set has k victims on this node and card, so only the
	// priorities and the units differ: cheaper compares those without building the plan.
	cheaper := func(set []int, units int64) bool {
		var maxP int32
		var sumP int64
		for n, i := range set {
			if p := candidates[i].vi.Priority; n == 0 || p > maxP {
				maxP = p
			}
			sumP += int64(candidates[i].vi.Priority)
		}
		return cmp.Or(cmp.Compare(maxP, best.MaxPriority), cmp.Compare(sumP, best.SumPriority), cmp.Compare(units, best.Units)) < 0
	}
	tried := 0
	var walk func(start, depth int, units int64)
	walk = func(start, depth int, units int64) {
		if tried >= maxVictimCombinations {
			return
		}
		if depth == k {
			tried++
			if units >= deficit && cheaper(set, units) {
				best = plan(set)
			}
			return
		}
		for i := start; i <= len(candidates)-(k-depth); i++ {
			set[depth] = i
			walk(i+1, depth+1, units+candidates[i].units)
		}
	}
	walk(0, 0, 0)
	return best, true
}
