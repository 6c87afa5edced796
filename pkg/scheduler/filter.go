package scheduler

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/scheduler/preempt"
	"github.com/gpushare/gpushare/pkg/scheduler/wire"
)

// Filter keeps the nodes on which every gpu-mem container of the pod has a card; with
// WithFilterChoosing, only the best of them. A node turned away gets the reason's summary
// (placement.FitError.Summary: the same words for every node that fails the same way, so that
// kube-scheduler's FailedScheduling event counts nodes per reason); the node's own detail is
// logged at V(4). It answers in NodeNames when asked with NodeNames
// (nodeCacheCapable) and in Nodes otherwise, and never returns a node it was not given.
func (e *Extender) Filter(ctx context.Context, args *extenderv1.ExtenderArgs) *extenderv1.ExtenderFilterResult {
	var res *extenderv1.ExtenderFilterResult
	e.filter(ctx, args, func(a *wire.FilterAnswer) { res = a.Result() })
	return res
}

// appendFilter appends Filter's answer as JSON to b, written from the pass's verdicts
// (wire.FilterAnswer).
func (e *Extender) appendFilter(ctx context.Context, b []byte, args *extenderv1.ExtenderArgs) ([]byte, error) {
	var err error
	e.filter(ctx, args, func(a *wire.FilterAnswer) { b, err = a.AppendJSON(b) })
	return b, err
}

// filter runs Filter's pass and hands its answer to use before the pass's buffers go back to
// their pool.
func (e *Extender) filter(ctx context.Context, args *extenderv1.ExtenderArgs, use func(*wire.FilterAnswer)) {
	logger := klog.FromContext(ctx)
	names := argNodeNames(args)
	if args.Pod == nil {
		use(&wire.FilterAnswer{Args: args, Names: names, Err: "filter: request has no pod"})
		return
	}
	e.preempt.MaintainHolds(logger)
	buf := e.buffers.get(len(names))
	defer e.buffers.put(buf)
	answer := &wire.FilterAnswer{Args: args, Names: names, Passed: buf.fits, Failures: buf.failures}
	req, err := e.request(args.Pod)
	if err != nil {
		invalid := &placement.FitError{Reason: err.Error(), Summary: err.Error(), Unresolvable: true}
		for i := range buf.failures {
			buf.failures[i] = invalid
		}
		e.metrics.unfit.WithLabelValues(UnfitInvalidRequest).Add(float64(len(names)))
		use(answer)
		return
	}
	knownUnfit := false // every node was planned on and the pod fits none
	view := e.nodeView(verbFilter, args.Pod.UID)
	if e.filterChooses && !req.Empty() {
		e.scoreNodes(view, args.Pod, &req, names, buf)
		if best, _, _ := topNode(args.Pod, names, buf.raw, buf.fits); best >= 0 {
			clear(buf.fits)
			buf.fits[best] = true
			logger.V(2).Info("Filtered", "pod", klog.KObj(args.Pod), "nodes", len(names), "chosen", names[best])
			e.metrics.filters.Add(1)
			use(answer)
			return
		}
		clear(buf.fits) // fits nowhere: say why below, without planning again
		knownUnfit = true
	}
	var sums *placement.Summaries // each node's own reason is only logged, at V(4)
	if !logger.V(4).Enabled() {
		sums = placement.NewSummaries(&req, e.names.UnitLabel())
	}
	if !req.Empty() {
		res := podResources(args.Pod)
		parallelize(len(names), func(lo, hi int) {
			var plan placement.Plan
			d := placement.NewDecision(e.placer, &req, res) // one per goroutine
			view.Visit(names[lo:hi], func(i int, node *placement.NodeInfo) {
				if fe := e.check(d, node, &plan, knownUnfit, sums); fe != nil {
					buf.failures[lo+i] = fe
				}
			})
		})
	}
	passed := e.tally(logger, args.Pod, names, buf.failures, buf.fits)
	if passed == 0 && !req.Empty() {
		if h, held := e.preempt.Holds().Of(args.Pod.UID); held {
			answer.Err = waitingForVictims(h)
		} else {
			e.preempt.InBackground(ctx, args.Pod, &req, names, buf.failures, e.nodeView(verbPreempt, args.Pod.UID))
		}
	}
	use(answer)
}

// tally marks in fits the nodes without a failure, logs the others at V(4), and counts the
// call and its unfit nodes by reason; it returns how many nodes passed.
func (e *Extender) tally(logger klog.Logger, pod *v1.Pod, names []string, failures []*placement.FitError, fits []bool) int {
	passed := 0
	detail := logger.V(4) // checked once: a disabled call still boxes its arguments, per node
	for i, fe := range failures {
		switch {
		case fe == nil:
			fits[i] = true
			passed++
		case detail.Enabled():
			detail.Info("Node filtered out", "pod", klog.KObj(pod), "node", names[i], "reason", fe.Reason)
		}
	}
	logger.V(2).Info("Filtered", "pod", klog.KObj(pod), "nodes", len(names), "passed", passed)
	unresolvable, full := countFailures(failures)
	if unresolvable > 0 {
		e.metrics.unfit.WithLabelValues(UnfitUnresolvable).Add(float64(unresolvable))
	}
	if full > 0 {
		e.metrics.unfit.WithLabelValues(UnfitNoFreeBlock).Add(float64(full))
	}
	e.metrics.filters.Add(1)
	return passed
}

// waitingForVictims is filter's answer to a pod whose preemption is under way: the card is held
// for it and its victims still hold the memory. An error, not "fits nowhere": kube-scheduler
// retries an error after its backoff, while an unschedulable pod waits for a cluster event, and
// the victim's deletion, the one event there is, may reach kube-scheduler before this
// extender's cache has seen it (the pod then waited up to kube-scheduler's 5 min for
// unschedulable pods).
func waitingForVictims(h preempt.HoldRecord) string {
	return fmt.Sprintf("GPU memory: GPU %d of node %s is held for this pod until its preempted pods release it (%s); retry",
		h.GPU, h.Node, strings.Join(h.Victims, ", "))
}

// countFailures counts the failures, unresolvable or not.
func countFailures(failures []*placement.FitError) (unresolvable, full int) {
	for _, fe := range failures {
		switch {
		case fe == nil:
		case fe.Unresolvable:
			unresolvable++
		default:
			full++
		}
	}
	return unresolvable, full
}

// unknownNode is the reason of a candidate the extender does not know.
var unknownNode = &placement.FitError{
	Reason:       "GPU memory: node is not a GPU-sharing node known to the extender",
	Summary:      "GPU memory: node is not a GPU-sharing node known to the extender",
	Unresolvable: true,
}

// check says why d's pod does not fit node (nil when it fits); plan is scratch space. With
// unfit, the caller already knows the pod does not fit and only the reason is wanted. The
// reason comes from sums (the summary filter answers, shared by the nodes that fail alike), or
// with the node's own detail when sums is nil.
func (e *Extender) check(d *placement.Decision, node *placement.NodeInfo, plan *placement.Plan, unfit bool, sums *placement.Summaries) *placement.FitError {
	switch {
	case node == nil:
		return unknownNode
	case !unfit && d.Feasible(node, plan):
		return nil
	case sums == nil:
		return placement.Explain(node, d.Request(), e.names.UnitLabel())
	}
	return sums.Explain(node)
}

// argNodeNames lists the candidate nodes of a request, whichever form it used.
func argNodeNames(args *extenderv1.ExtenderArgs) []string {
	if args.NodeNames != nil {
		return *args.NodeNames
	}
	if args.Nodes == nil {
		return nil
	}
	out := make([]string, len(args.Nodes.Items))
	for i := range args.Nodes.Items {
		out[i] = args.Nodes.Items[i].Name
	}
	return out
}
