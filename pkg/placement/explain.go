package placement

import (
	"fmt"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

// FitError says why a pod does not fit a node, in words for people. It is defined in gpumem, a
// pure package that the extender's wire codec (pkg/scheduler/wire) may import, so that the
// codec writes placement's verdicts without importing placement.
type FitError = gpumem.FitError

// misfit is why a pod does not fit a node, before it is put in words.
type misfit int

const (
	misfitNoGPUs      misfit = iota // the node has no shared GPUs
	misfitUnhealthy                 // every card is unhealthy
	misfitModel                     // no healthy card of an accepted model
	misfitFewCards                  // fewer usable cards than a container spreads over
	misfitTooSmall                  // no usable card is as large as a container's per-card ask
	misfitNoFreeBlock               // no usable card has that much free now
	misfitTogether                  // each fits alone, the containers do not fit together
	misfitKinds
)

// unresolvable reports whether removing pods from the node would not help.
func (m misfit) unresolvable() bool { return m != misfitNoFreeBlock && m != misfitTogether }

// classification is what Explain found about a node.
type classification struct {
	kind       misfit
	need       int64 // largest per-card ask of a container
	cards      int   // most cards a container spreads over
	eligible   int   // cards the pod may use
	largestCap int64 // capacity of the largest of them
	best       int   // position of the eligible card with the most free units
	healthy    int
	nodeGPUs   int
}

// classify says why req does not fit node.
func classify(node *NodeInfo, req *gpumem.PodRequest) classification {
	c := classification{best: -1, nodeGPUs: len(node.GPUs)}
	for _, ct := range req.Containers {
		c.need, c.cards = max(c.need, ct.PerGPU()), max(c.cards, ct.GPUs)
	}
	usable, caps := node.UsableFree(), node.Capacities() // the snapshot's summaries: no pass over GPUs
	for g, free := range usable {
		if free >= 0 { // healthy
			c.healthy++
		}
		if !node.CardFits(g, 0, req) {
			continue
		}
		c.eligible++
		c.largestCap = max(c.largestCap, caps[g])
		if c.best < 0 || free > usable[c.best] {
			c.best = g
		}
	}
	switch {
	case len(node.GPUs) == 0:
		c.kind = misfitNoGPUs
	case c.eligible == 0 && c.healthy == 0:
		c.kind = misfitUnhealthy
	case c.eligible == 0:
		c.kind = misfitModel
	case c.eligible < c.cards:
		c.kind = misfitFewCards
	case c.largestCap < c.need:
		c.kind = misfitTooSmall
	case usable[c.best] < c.need:
		c.kind = misfitNoFreeBlock
	default:
		c.kind = misfitTogether
	}
	return c
}

// summary words c in terms of the pod alone.
func (c *classification) summary(req *gpumem.PodRequest, unit string) string {
	switch c.kind {
	case misfitNoGPUs:
		return "GPU memory: node has no shared GPUs"
	case misfitUnhealthy:
		return "GPU memory: all GPUs of the node are unhealthy"
	case misfitModel:
		return fmt.Sprintf("GPU model: no healthy GPU of model %s", strings.Join(req.Models, "|"))
	case misfitFewCards:
		return fmt.Sprintf("GPU memory: pod needs %d GPUs, fewer are usable", c.cards)
	case misfitTooSmall:
		return fmt.Sprintf("GPU memory: no GPU has %d %s", c.need, unit)
	case misfitNoFreeBlock:
		return fmt.Sprintf("GPU memory: no GPU has %d %s free", c.need, unit)
	}
	return together(req, unit)
}

// reason words c for this node.
func (c *classification) reason(node *NodeInfo, req *gpumem.PodRequest, unit string) string {
	switch c.kind {
	case misfitUnhealthy:
		return fmt.Sprintf("GPU memory: all %d GPUs of the node are unhealthy", c.nodeGPUs)
	case misfitModel:
		models := map[string]bool{}
		for g := range node.GPUs {
			if node.GPUs[g].Healthy {
				models[node.GPUs[g].Model] = true
			}
		}
		have := make([]string, 0, len(models))
		for m := range models {
			have = append(have, fmt.Sprintf("%q", m))
		}
		sort.Strings(have)
		return fmt.Sprintf("GPU model: pod accepts %s, node has %s", strings.Join(req.Models, "|"), strings.Join(have, ", "))
	case misfitFewCards:
		return fmt.Sprintf("GPU memory: pod needs %d GPUs, node has %d usable", c.cards, c.eligible)
	case misfitTooSmall:
		return fmt.Sprintf("GPU memory: largest GPU has %d %s, pod needs %d %s on one GPU", c.largestCap, unit, c.need, unit)
	case misfitNoFreeBlock:
		b := &node.GPUs[c.best]
		return fmt.Sprintf("GPU memory: largest free block %d %s on GPU%d, pod needs %d %s", b.Free(), unit, b.Index, c.need, unit)
	}
	return c.summary(req, unit) // the node adds nothing
}

// together words misfitTogether: for a pod of one container spread over several cards, that
// too few cards have its per-card ask free (short: kube-scheduler's answer repeats it for every
// node turned away); for several containers, that they do not fit side by side.
func together(req *gpumem.PodRequest, unit string) string {
	if len(req.Containers) == 1 {
		ct := req.Containers[0]
		return fmt.Sprintf("GPU memory: fewer than %d GPUs have %d %s free", ct.GPUs, ct.PerGPU(), unit)
	}
	return fmt.Sprintf("GPU memory: the pod's %d containers (%d %s in all) do not fit together on the free GPU memory",
		len(req.Containers), req.TotalUnits(), unit)
}

// Explain says why req does not fit node; unit labels the quantities (e.g. "GiB").
func Explain(node *NodeInfo, req *gpumem.PodRequest, unit string) *FitError {
	c := classify(node, req)
	return &FitError{Reason: c.reason(node, req, unit), Summary: c.summary(req, unit), Unresolvable: c.kind.unresolvable()}
}

// Summaries explains one pod's misfits on many nodes with the summaries alone: each kind of
// misfit is worded once and its FitError shared (read-only) by every node that fails that way,
// so that explaining thousands of nodes allocates nothing per node. Safe for concurrent use.
type Summaries struct {
	req  *gpumem.PodRequest
	unit string
	errs [misfitKinds]atomic.Pointer[FitError] // no lock per node: passes in parallel share it
}

// NewSummaries explains req's misfits in unit (e.g. "GiB").
func NewSummaries(req *gpumem.PodRequest, unit string) *Summaries {
	return &Summaries{req: req, unit: unit}
}

// Explain says why the pod does not fit node: a FitError with Summary and Unresolvable set
// and Reason empty, shared with the other nodes that fail the same way.
func (s *Summaries) Explain(node *NodeInfo) *FitError {
	c := classify(node, s.req)
	slot := &s.errs[c.kind]
	if fe := slot.Load(); fe != nil {
		return fe
	}
	slot.CompareAndSwap(nil, &FitError{Summary: c.summary(s.req, s.unit), Unresolvable: c.kind.unresolvable()})
	return slot.Load() // the first worded wins, so that every node shares one
}
