package sim

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

// Preemption in the simulator (--preemption) is the extender's (pkg/scheduler/preempt.go): a pod
// that fits no node asks placement.PlanPreemption on every node, the cheapest plan
// (PreemptionPlan.Compare) among those after which the pod's CPU and memory fit there too is
// carried out, and the pod is placed on that node. The victims are removed from the cluster at
// once and are not submitted again: no controller re-creates them, as a rejected pod of the
// paper's protocol is not retried either. Every pod counts as bound, so none is protected as an
// assumed pod is in the extender. Priorities come from the trace's qos column (QoSPriority).

// The QoS classes of openb's qos column.
const (
	QoSGuaranteed = "Guaranteed"
	QoSLS         = "LS"
	QoSBurstable  = "Burstable"
	QoSBE         = "BE"
)

// QoSPriority is the priority the simulator gives a pod of class qos: Guaranteed above LS
// (latency-sensitive) above Burstable above BE (best effort). A trace without the qos column
// ("") is all BE. An unknown class is an error.
func QoSPriority(qos string) (int32, error) {
	switch qos {
	case QoSGuaranteed:
		return 3000, nil
	case QoSLS:
		return 2000, nil
	case QoSBurstable:
		return 1000, nil
	case QoSBE, "":
		return 0, nil
	}
	return 0, fmt.Errorf("%w: unknown qos %q", ErrBadTrace, qos)
}

// highPriority reports whether priority is above BE's: the pods whose allocation the run
// reports apart (Result.HighCurve).
func highPriority(priority int32) bool { return priority > 0 }

// preempter carries out preemptions in one run and counts them; it is used by one goroutine.
type preempter struct {
	// rooms are what each node's cards could free, by node name, for the snapshot they were
	// built from (snapshots are immutable: a changed node is a new snapshot).
	rooms map[string]*nodeRoom
	// preemptions counts the pods placed by preempting, victims the pods evicted.
	preemptions, victims int
	// evicted is the victims' GPU request (milli-GPU) in all, evictedHigh that of the
	// high-priority ones; pending* is what the run has not yet taken (take).
	evicted, pendingEvicted, pendingHigh int64
}

// take returns the milli-GPU evicted since the last call, all and high-priority.
func (e *preempter) take() (all, high int64) {
	all, high = e.pendingEvicted, e.pendingHigh
	e.pendingEvicted, e.pendingHigh = 0, 0
	return all, high
}

// free plans a preemption for d's pod of priority over nodes and carries out the cheapest one
// after which the pod fits its node; it returns that node's snapshot without the victims.
func (e *preempter) free(c cache.Cache, nodes []*placement.NodeInfo, d *placement.Decision, priority int32) (*placement.NodeInfo, bool) {
	if !highPriority(priority) || d.Request().Empty() || placement.PreemptionUnsupported(d.Request()) {
		return nil, false // nothing is below BE; the extender plans for one card of one container only
	}
	var best placement.PreemptionPlan
	var after *placement.NodeInfo
	for _, n := range nodes {
		if n == nil {
			continue
		}
		plan, ok := e.room(n).plan(d.Request(), priority)
		if !ok || (after != nil && plan.Compare(&best) >= 0) {
			continue
		}
		if without, fits := fitsWithout(c, d, &plan); fits {
			best, after = plan, without
		}
	}
	if after == nil {
		return nil, false
	}
	e.evict(c, &best)
	return after, true
}

// fitsWithout is plan's node without its victims, and whether d's pod fits it then (its CPU,
// memory and GPU memory).
func fitsWithout(c cache.Cache, d *placement.Decision, plan *placement.PreemptionPlan) (*placement.NodeInfo, bool) {
	uids := make([]types.UID, len(plan.Victims))
	for i := range plan.Victims {
		uids[i] = plan.Victims[i].UID
	}
	n, ok := c.NodeWithout(plan.Node, uids)
	if !ok || !podFits(n, d.Resources()) {
		return nil, false
	}
	var scratch placement.Plan
	return n, d.Feasible(n, &scratch)
}

// evict removes plan's victims from the cluster and counts them.
func (e *preempter) evict(c cache.Cache, plan *placement.PreemptionPlan) {
	e.preemptions++
	for i := range plan.Victims {
		v := &plan.Victims[i]
		c.ForgetPod(v.UID)
		e.victims++
		e.evicted += v.Units
		e.pendingEvicted += v.Units
		if highPriority(v.Priority) {
			e.pendingHigh += v.Units
		}
	}
}

// nodeRoom is, for one node snapshot, the units held on each card by pods of each priority,
// and the preemption plans made on it so far. The simulator plans on every node for every pod
// that fits none, and those pods ask few distinct things: a node unchanged since the last ask
// answers from here.
type nodeRoom struct {
	snap  *placement.NodeInfo
	held  [][]heldUnits // by card position
	plans map[planKey]plannedPreemption
}

// planKey is what a plan depends on besides the node: the pod's ask, models and priority.
type planKey struct {
	need     int64
	priority int32
	models   string
}

// plannedPreemption is placement.PlanPreemption's answer.
type plannedPreemption struct {
	plan placement.PreemptionPlan
	ok   bool
}

// plan is placement.PlanPreemption's plan for req at priority on the room's node, every pod
// there a candidate victim of its own priority (none is protected or terminating).
func (r *nodeRoom) plan(req *gpumem.PodRequest, priority int32) (placement.PreemptionPlan, bool) {
	key := planKey{need: req.Containers[0].Units, priority: priority, models: strings.Join(req.Models, "|")}
	if p, ok := r.plans[key]; ok {
		return p.plan, p.ok
	}
	var p plannedPreemption
	if r.mayFree(req, priority) {
		info := func(p *placement.PodInfo) placement.VictimInfo { return placement.VictimInfo{Priority: p.Priority} }
		p.plan, p.ok = placement.PlanPreemption(r.snap, req, priority, info)
	}
	if r.plans == nil {
		r.plans = map[planKey]plannedPreemption{}
	}
	r.plans[key] = p
	return p.plan, p.ok
}

// heldUnits are the units held on a card by the pods of one priority.
type heldUnits struct {
	priority int32
	units    int64
}

// room is n's nodeRoom, built again when n is a new snapshot.
func (e *preempter) room(n *placement.NodeInfo) *nodeRoom {
	if r := e.rooms[n.Name]; r != nil && r.snap == n {
		return r
	}
	r := &nodeRoom{snap: n, held: make([][]heldUnits, len(n.GPUs))}
	for i := range n.Pods {
		p := &n.Pods[i]
		for idx, units := range p.Allocation.PerGPU() {
			if g, ok := n.Position(idx); ok && units > 0 {
				r.held[g] = addHeld(r.held[g], p.Priority, units)
			}
		}
	}
	if e.rooms == nil {
		e.rooms = map[string]*nodeRoom{}
	}
	e.rooms[n.Name] = r
	return r
}

func addHeld(h []heldUnits, priority int32, units int64) []heldUnits {
	for i := range h {
		if h[i].priority == priority {
			h[i].units += units
			return h
		}
	}
	return append(h, heldUnits{priority: priority, units: units})
}

// mayFree reports whether placement.PlanPreemption can find a plan on n for req at priority:
// a card of the pod's model, large enough, where it does not fit now and would once every pod
// of lower priority is gone. It is PlanPreemption's own condition for a node without
// terminating pods (the simulator has none), one pass over a cached summary instead of one
// over the node's pods per card: the simulator asks it of every node for every pod that fits
// none.
func (r *nodeRoom) mayFree(req *gpumem.PodRequest, priority int32) bool {
	n, need := r.snap, req.Containers[0].Units
	for g := range n.GPUs {
		card := &n.GPUs[g]
		free := card.Free()
		if !card.Healthy || card.Capacity < need || free >= need || (len(req.Models) > 0 && !req.AcceptsModel(card.Model)) {
			continue
		}
		for _, h := range r.held[g] {
			if h.priority < priority {
				free += h.units
			}
		}
		if free >= need {
			return true
		}
	}
	return false
}
