package placement

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

// FitError says why a pod does not fit a node, in words for people.
type FitError struct {
	// Reason is the explanation for this node (bind errors, logs): its cards and free blocks.
	Reason string
	// Summary is the same reason in words that depend on the pod alone, so that kube-scheduler,
	// which counts identical reasons over the nodes, summarises a FailedScheduling event as
	// "0/1000 nodes are available: 700 GPU memory: no GPU has 4 GiB free, 300 ...".
	Summary string
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
		r := "GPU memory: node has no shared GPUs"
		return &FitError{Reason: r, Summary: r, Unresolvable: true}
	case eligible == 0:
		reason, summary := noEligible(node, req)
		return &FitError{Reason: reason, Summary: summary, Unresolvable: true}
	case eligible < cards:
		return &FitError{Reason: fmt.Sprintf("GPU memory: pod needs %d GPUs, node has %d usable", cards, eligible),
			Summary: fmt.Sprintf("GPU memory: pod needs %d GPUs, fewer are usable", cards), Unresolvable: true}
	case largestCap < need:
		return &FitError{Reason: fmt.Sprintf("GPU memory: largest GPU has %d%s, pod needs %d%s on one GPU", largestCap, unit, need, unit),
			Summary: fmt.Sprintf("GPU memory: no GPU has %d%s", need, unit), Unresolvable: true}
	case node.GPUs[best].Free() < need:
		return &FitError{Reason: fmt.Sprintf("GPU memory: largest free block %d%s on GPU%d, pod needs %d%s",
			node.GPUs[best].Free(), unit, node.GPUs[best].Index, need, unit),
			Summary: fmt.Sprintf("GPU memory: no GPU has %d%s free", need, unit)}
	}
	r := fmt.Sprintf("GPU memory: the pod's %d containers (%d%s in all) do not fit together on the free GPU memory",
		len(req.Containers), req.TotalUnits(), unit)
	return &FitError{Reason: r, Summary: r}
}

// noEligible explains a node none of whose cards the pod may use: the reason and its summary.
func noEligible(node *NodeInfo, req *gpumem.PodRequest) (reason, summary string) {
	healthy, models := 0, map[string]bool{}
	for g := range node.GPUs {
		if node.GPUs[g].Healthy {
			healthy++
			models[node.GPUs[g].Model] = true
		}
	}
	if healthy == 0 {
		return fmt.Sprintf("GPU memory: all %d GPUs of the node are unhealthy", len(node.GPUs)), "GPU memory: all GPUs of the node are unhealthy"
	}
	have := make([]string, 0, len(models))
	for m := range models {
		have = append(have, fmt.Sprintf("%q", m))
	}
	sort.Strings(have)
	accepts := strings.Join(req.Models, "|")
	return fmt.Sprintf("GPU model: pod accepts %s, node has %s", accepts, strings.Join(have, ", ")),
		fmt.Sprintf("GPU model: no healthy GPU of model %s", accepts)
}
