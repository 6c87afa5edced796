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
	return explain(node, req, unit, true)
}

// ExplainSummary is Explain with the Summary alone (Reason empty): what filter answers for
// each of thousands of nodes, at half the formatting.
func ExplainSummary(node *NodeInfo, req *gpumem.PodRequest, unit string) *FitError {
	return explain(node, req, unit, false)
}

// explain is Explain, formatting the node's own Reason only with detail.
func explain(node *NodeInfo, req *gpumem.PodRequest, unit string, detail bool) *FitError {
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
	fe := &FitError{Unresolvable: true}
	switch {
	case len(node.GPUs) == 0:
		fe.Summary = "GPU memory: node has no shared GPUs"
		fe.Reason = fe.Summary
	case eligible == 0:
		fe.Reason, fe.Summary = noEligible(node, req, detail)
	case eligible < cards:
		fe.Summary = fmt.Sprintf("GPU memory: pod needs %d GPUs, fewer are usable", cards)
		if detail {
			fe.Reason = fmt.Sprintf("GPU memory: pod needs %d GPUs, node has %d usable", cards, eligible)
		}
	case largestCap < need:
		fe.Summary = fmt.Sprintf("GPU memory: no GPU has %d %s", need, unit)
		if detail {
			fe.Reason = fmt.Sprintf("GPU memory: largest GPU has %d %s, pod needs %d %s on one GPU", largestCap, unit, need, unit)
		}
	case node.GPUs[best].Free() < need:
		fe.Unresolvable = false
		fe.Summary = fmt.Sprintf("GPU memory: no GPU has %d %s free", need, unit)
		if detail {
			fe.Reason = fmt.Sprintf("GPU memory: largest free block %d %s on GPU%d, pod needs %d %s",
				node.GPUs[best].Free(), unit, node.GPUs[best].Index, need, unit)
		}
	default:
		fe.Unresolvable = false
		fe.Summary = fmt.Sprintf("GPU memory: the pod's %d containers (%d %s in all) do not fit together on the free GPU memory",
			len(req.Containers), req.TotalUnits(), unit)
		fe.Reason = fe.Summary
	}
	return fe
}

// noEligible explains a node none of whose cards the pod may use: the reason and its summary.
func noEligible(node *NodeInfo, req *gpumem.PodRequest, detail bool) (reason, summary string) {
	healthy, models := 0, map[string]bool{}
	for g := range node.GPUs {
		if node.GPUs[g].Healthy {
			healthy++
			models[node.GPUs[g].Model] = true
		}
	}
	if healthy == 0 {
		if detail {
			reason = fmt.Sprintf("GPU memory: all %d GPUs of the node are unhealthy", len(node.GPUs))
		}
		return reason, "GPU memory: all GPUs of the node are unhealthy"
	}
	accepts := strings.Join(req.Models, "|")
	summary = fmt.Sprintf("GPU model: no healthy GPU of model %s", accepts)
	if !detail {
		return "", summary
	}
	have := make([]string, 0, len(models))
	for m := range models {
		have = append(have, fmt.Sprintf("%q", m))
	}
	sort.Strings(have)
	return fmt.Sprintf("GPU model: pod accepts %s, node has %s", accepts, strings.Join(have, ", ")), summary
}
