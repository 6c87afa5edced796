package placement

import (
	"errors"
	"fmt"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

// assumeRetries bounds how often Assume plans again when a concurrent placement took the
// chosen cards first.
const assumeRetries = 3

// Decision places one pod. It is the one pipeline that the extender's verbs and the trace
// simulator share, step by step:
//
//	Feasible  does the pod fit the node?                         (filter)
//	Score     plan the pod on the node and rate the node         (prioritize)
//	Choose    the best-rated feasible node, ties in a set order  (the simulator; kube-scheduler
//	          chooses for the extender, whose bind then calls Place)
//	Assume    charge the plan to the node, planning again when a concurrent placement took
//	          the cards first                                     (bind, the simulator)
//
// Every step ranks and scores through the one Scorer the policy made for this pod. A Decision
// is used by one goroutine; passes in parallel make one each.
type Decision struct {
	req    *gpumem.PodRequest
	res    PodResources
	scorer Scorer
	plans  shortcuts // scorer's planning shortcuts
}

// NewDecision starts the placement of a pod that asks req of GPU memory and res of the rest.
func NewDecision(policy Policy, req *gpumem.PodRequest, res PodResources) *Decision {
	scorer := policy.ForPod(res)
	return &Decision{req: req, res: res, scorer: scorer, plans: newShortcuts(scorer)}
}

// Request is the pod's GPU-memory request.
func (d *Decision) Request() *gpumem.PodRequest { return d.req }

// Resources is the pod's CPU and memory.
func (d *Decision) Resources() PodResources { return d.res }

// Feasible reports whether the pod fits node; plan is scratch space. A pod that asks no GPU
// memory fits every node.
func (d *Decision) Feasible(node *NodeInfo, plan *Plan) bool {
	if r := d.req; len(r.Containers) == 1 && r.Containers[0].GPUs == 1 && len(r.Models) == 0 {
		return node.MaxFree >= r.Containers[0].Units // one card of any model: the largest free block decides
	}
	return d.plan(node, plan)
}

// plan plans the pod on node into p; a pod that asks no GPU memory gets an empty plan.
func (d *Decision) plan(node *NodeInfo, p *Plan) bool {
	if d.req.Empty() {
		p.Slots = nil
		return true
	}
	return d.plans.planInto(node, d.req, p)
}

// Score plans the pod on node into plan and rates node with it; ok is false when the pod does
// not fit.
func (d *Decision) Score(node *NodeInfo, plan *Plan) (score float64, ok bool) {
	if !d.plan(node, plan) {
		return 0, false
	}
	return d.scorer.ScoreNode(node, plan, d.req), true
}

// Choice is a node chosen for the pod and the plan made on it.
type Choice struct {
	// Index is the node's position in the list it was chosen from (-1 when chosen by Place).
	Index int
	// Node is the node's snapshot the plan was made on.
	Node *NodeInfo
	// Plan is where the pod goes on Node.
	Plan *Plan
	// Score is the node's rating (0 when chosen by Place).
	Score float64
}

// Choose returns the feasible node of nodes with the best score and its plan; ok is false when
// the pod fits none. Nil nodes, and nodes admit refuses (admit may be nil), are skipped. Among
// nodes of equal score, before(i, j) reports whether nodes[i] wins over nodes[j].
func (d *Decision) Choose(nodes []*NodeInfo, admit func(*NodeInfo) bool, before func(i, j int) bool) (Choice, bool) {
	best, scratch := Choice{Index: -1, Plan: &Plan{}}, &Plan{}
	for i, n := range nodes {
		if n == nil || (admit != nil && !admit(n)) {
			continue
		}
		s, ok := d.Score(n, scratch)
		if !ok {
			continue
		}
		if best.Index < 0 || s > best.Score || (s == best.Score && before(i, best.Index)) {
			best.Plan, scratch = scratch, best.Plan // keep the plan by pointer: it may hold its slot inline
			best.Index, best.Node, best.Score = i, n, s
		}
	}
	return best, best.Index >= 0
}

// Place plans the pod on node, the node chosen by someone else (kube-scheduler); when it does
// not fit, the error says why in words for people, quantities labelled with unit.
func (d *Decision) Place(node *NodeInfo, unit string) (Choice, error) {
	plan := &Plan{}
	if !d.plan(node, plan) {
		return Choice{}, Explain(node, d.req, unit)
	}
	return Choice{Index: -1, Node: node, Plan: plan}, nil
}

// Assumer charges a pod's placement to a node and returns the placement it holds there (a pod
// already placed keeps its placement), as the cache's AssumePod does. Its error wraps
// ErrDoesNotFit when the cards are no longer free.
type Assumer func(node string, alloc gpumem.Allocation) (gpumem.Allocation, error)

// Assume charges c's plan through assume. When a concurrent placement took the cards first, it
// plans again on the node's fresh snapshot from lookup, up to assumeRetries times in all; the
// error then says why the pod no longer fits.
func (d *Decision) Assume(c Choice, lookup func(name string) (*NodeInfo, bool), assume Assumer, unit string) (gpumem.Allocation, error) {
	name := c.Node.Name
	for try := 1; ; try++ {
		alloc, err := assume(name, c.Plan.Allocation(c.Node, d.req))
		if err == nil || !errors.Is(err, ErrDoesNotFit) || try == assumeRetries {
			return alloc, err
		}
		node, ok := lookup(name)
		if !ok {
			return nil, fmt.Errorf("%w: %s", ErrUnknownNode, name)
		}
		if c, err = d.Place(node, unit); err != nil {
			return nil, err
		}
	}
}
