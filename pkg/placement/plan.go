package placement

import (
	"github.com/gpushare/gpushare/pkg/gpumem"
)

// Slot is one card of one container in a plan.
type Slot struct {
	// Container indexes PodRequest.Containers.
	Container int
	// GPU indexes NodeInfo.GPUs (a position, not the NVML index).
	GPU int
	// Units is what the container takes on that card.
	Units int64
}

// Plan is a candidate placement of a pod on a node: one slot per container card.
type Plan struct {
	// Slots lists the chosen cards.
	Slots []Slot
	one   [1]Slot // storage for the common one-slot plan
}

// Allocation turns the plan into the pod's placement annotation value.
func (p *Plan) Allocation(node *NodeInfo, req *gpumem.PodRequest) gpumem.Allocation {
	a := gpumem.Allocation{}
	for _, s := range p.Slots {
		key := req.Containers[s.Container].Key
		if a[key] == nil {
			a[key] = map[int]int64{}
		}
		a[key][node.GPUs[s.GPU].Index] += s.Units
	}
	return a
}

// Charge is the units the plan adds to GPU position g: the larger of the pod's largest init
// container there and the sum of its app containers there.
func (p *Plan) Charge(req *gpumem.PodRequest, g int) int64 {
	var initMax, apps int64
	for _, s := range p.Slots {
		if s.GPU != g {
			continue
		}
		if req.Containers[s.Container].Init {
			initMax = max(initMax, s.Units)
		} else {
			apps += s.Units
		}
	}
	return max(initMax, apps)
}

// TotalCharge is the units the plan adds to the node: Charge summed over the GPUs it uses.
func (p *Plan) TotalCharge(req *gpumem.PodRequest) int64 {
	var units int64
	for i, s := range p.Slots {
		if p.FirstSlotOn(i) {
			units += p.Charge(req, s.GPU)
		}
	}
	return units
}

// UsedGPUs lists the GPU positions the plan touches, each once, in slot order.
func (p *Plan) UsedGPUs() []int {
	out := make([]int, 0, len(p.Slots))
	for i, s := range p.Slots {
		if p.FirstSlotOn(i) {
			out = append(out, s.GPU)
		}
	}
	return out
}

// FirstSlotOn reports whether slot i is the plan's first slot on its GPU; iterating the slots
// for which it holds visits every used GPU once without allocating.
func (p *Plan) FirstSlotOn(i int) bool {
	for j := range i {
		if p.Slots[j].GPU == p.Slots[i].GPU {
			return false
		}
	}
	return true
}
