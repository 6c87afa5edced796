package placement

import (
	"fmt"
	"strings"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

// FitError says why a pod does not fit a node, in words for people.
type FitError struct {
	// Reason is the explanation shown in the pod's events.
	Reason string
	// Unresolvable is true when removing pods from the node would not help (no card is big
	// enough, too few cards, no card of an accepted model, all unhealthy).
	Unresolvable bool
}

func (e *FitError) Error() string { return e.Reason }

// Explain says why req does not fit node; unit labels the quantities (e.g. "GiB").
func Explain(node *NodeInfo, req *gpumem.PodRequest, unit string) *FitError {
	need, cards := int64(0), 0
	for _, c := range req.Containers {
		need, cards = max(need, c.PerGPU()), max(cards, c.GPUs)
	}
	eligible, largestCap, best := 0, int64(0), -1
	for g := range node.GPUs {
		if !node.CardFits(g, 0, req) {
			continue
		}
		eligible++
		largestCap = max(largestCap, node.GPUs[g].Capacity)
		if best < 0 || node.GPUs[g].Free() > node.GPUs[best].Free() {
			best = g
		}
	}
	unit = " " + unit
	switch {
	case len(node.GPUs) == 0:
		return &FitError{Reason: "GPU memory: node has no shared GPUs", Unresolvable: true}
	case eligible == 0:
		return &FitError{Reason: noEligible(node, req), Unresolvable: true}
	case eligible < cards:
		return &FitError{Reason: fmt.Sprintf("GPU memory: pod needs %d GPUs, node has %d usable", cards, eligible), Unresolvable: true}
	case largestCap < need:
		return &FitError{Reason: fmt.Sprintf("GPU memory: largest GPU has %d%s, pod needs %d%s on one GPU", largestCap, unit, need, unit), Unresolvable: true}
	case node.GPUs[best].Free() < need:
		return &FitError{Reason: fmt.Sprintf("GPU memory: largest free block %d%s on GPU%d, pod needs %d%s",
			node.GPUs[best].Free(), unit, node.GPUs[best].Index, need, unit)}
	}
	return &FitError{Reason: fmt.Sprintf("GPU memory: the pod's %d containers (%d%s in all) do not fit together on the free GPU memory",
		len(req.Containers), req.TotalUnits(), unit)}
}

func noEligible(node *NodeInfo, req *gpumem.PodRequest) string {
	healthy, models := 0, map[string]bool{}
	for g := range node.GPUs {
		if node.GPUs[g].Healthy {
			healthy++
			models[node.GPUs[g].Model] = true
		}
	}
	if healthy == 0 {
		return fmt.Sprintf("GPU memory: all %d GPUs of the node are unhealthy", len(node.GPUs))
	}
	have := make([]string, 0, len(models))
	for m := range models {
		have = append(have, fmt.Sprintf("%q", m))
	}
	return fmt.Sprintf("GPU model: pod accepts %s, node has %s", strings.Join(req.Models, "|"), strings.Join(have, ", "))
}
