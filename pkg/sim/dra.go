package sim

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

// DRANode says who chooses a pod's node under Dynamic Resource Allocation, where
// kube-scheduler's allocator always chooses the card (placement.FirstFit).
type DRANode string

// The node choosers of a DRA variant.
const (
	// DRANodePredict: the extender's policy chooses the node, rating each node with the card
	// the allocator will take there (it knows the order the driver publishes).
	DRANodePredict DRANode = "predict"
	// DRANodeNaive: the extender's policy chooses the node as without DRA, rating each node with
	// the card it would choose itself, which the allocator may not take.
	DRANodeNaive DRANode = "naive"
	// DRANodeKube: kube-scheduler alone, without an extender (kubeScheduler).
	DRANodeKube DRANode = "kube"
)

// DRAOff names, in --dra, the runs without DRA: the policy chooses node and card.
const DRAOff = "off"

// DRA is one way of placing pods under DRA: who chooses the node, and the order in which the
// driver publishes the cards, in which the allocator takes the first that fit.
type DRA struct {
	Node  DRANode
	Order CardOrder
}

// String is the variant's name in --dra: the order ("index"), prefixed with "naive-" or
// "kube-" for those node choosers.
func (v *DRA) String() string {
	if v == nil {
		return DRAOff
	}
	if v.Node == DRANodePredict {
		return string(v.Order)
	}
	return string(v.Node) + "-" + string(v.Order)
}

// ParseDRA reads a variant's name (DRA.String); "off" is nil.
func ParseDRA(s string) (*DRA, error) {
	if s == DRAOff {
		return nil, nil
	}
	v := &DRA{Node: DRANodePredict, Order: CardOrder(s)}
	for _, n := range []DRANode{DRANodeNaive, DRANodeKube} {
		if rest, ok := strings.CutPrefix(s, string(n)+"-"); ok {
			v.Node, v.Order = n, CardOrder(rest)
		}
	}
	for _, o := range cardOrders() {
		if v.Order == o {
			return v, nil
		}
	}
	return nil, fmt.Errorf("%w: DRA variant %q: want off, or an order of %v, bare or after naive- or kube-", ErrBadConfig, s, cardOrders())
}

// joinOrders lists the card orders for --dra's help.
func joinOrders() string {
	out := make([]string, 0, len(cardOrders()))
	for _, o := range cardOrders() {
		out = append(out, string(o))
	}
	return strings.Join(out, ", ")
}

// draPlacer places pods under a DRA variant.
type draPlacer struct {
	variant DRA
	kube    *kubeScheduler // DRANodeKube only
}

// newDRAPlacer is nil for a run without DRA.
func newDRAPlacer(v *DRA) *draPlacer {
	if v == nil {
		return nil
	}
	p := &draPlacer{variant: *v}
	if v.Node == DRANodeKube {
		p.kube = &kubeScheduler{sampler: sampler{percentage: 0}} // kube-scheduler's default: adaptive
	}
	return p
}

// decide makes the decision for pod and chooses its node and cards: the policy's, or under DRA
// the variant's. An error says the simulator disagrees with itself.
func (p *placer) decide(pod *v1.Pod, req *gpumem.PodRequest, res placement.PodResources, unit string) (*placement.Decision, placement.Choice, bool, error) {
	if p.dra == nil {
		d := placement.NewDecision(p.policy, req, res)
		best, ok := p.choose(d, pod)
		return d, best, ok, nil
	}
	if p.dra.variant.Node == DRANodePredict {
		d := placement.NewDecision(firstFit(p.policy, p.dra.variant.Order), req, res)
		best, ok := p.choose(d, pod)
		return d, best, ok, nil
	}
	allocator := placement.NewDecision(firstFit(nil, p.dra.variant.Order), req, res)
	var node *placement.NodeInfo
	switch p.dra.variant.Node {
	case DRANodeNaive:
		best, ok := p.choose(placement.NewDecision(p.policy, req, res), pod)
		if !ok {
			return allocator, best, false, nil
		}
		node = best.Node
	case DRANodeKube:
		var ok bool
		if node, ok = p.dra.kube.choose(allocator, p.cache.Lookup(p.names)); !ok {
			return allocator, placement.Choice{}, false, nil
		}
	}
	best, err := allocator.Place(node, unit)
	if err != nil {
		return nil, best, false, fmt.Errorf("%w: pod %s: the allocator finds no cards on %s: %w", errNotPlaced, pod.Name, node.Name, err)
	}
	return allocator, best, true, nil
}

// sampleFits is kube-scheduler's filter for d's pod when it samples nodes for the extender:
// without DRA, CPU and memory and gpu-mem counted over the whole node (kubeFits); under DRA,
// CPU and memory and the allocator's answer on the node (DynamicResources runs it in Filter).
func (p *placer) sampleFits(d *placement.Decision) func(*placement.NodeInfo) bool {
	res := d.Resources()
	if p.dra == nil {
		units := d.Request().TotalUnits()
		return func(n *placement.NodeInfo) bool { return kubeFits(n, res, units) }
	}
	scratch := &placement.Plan{}
	return func(n *placement.NodeInfo) bool { return podFits(n, res) && d.Feasible(n, scratch) }
}
