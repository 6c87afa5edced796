package scheduler

import (
	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/placement"
)

// filterAnswer is a filter pass's verdict on each candidate, in the request's order, before it
// takes the wire's form: result builds kube-scheduler's type, appendJSON writes its JSON
// straight from the verdicts (no map of thousands of failed nodes built, hashed and sorted
// for a pod that fits nowhere). Both say the same; the slices belong to the pass and are valid
// only until it returns.
type filterAnswer struct {
	args *extenderv1.ExtenderArgs
	// names are the candidates, in the request's order.
	names []string
	// passed[i] reports whether names[i] passes; nil when none does.
	passed []bool
	// failures[i] says why names[i] fails, nil when it passes or when the pass gives no reason
	// (the nodes a choosing filter did not choose); failures may be nil.
	failures []*placement.FitError
	// err is the answer's Error; the answer then lists no node, passed or failed.
	err string
}

// result is the answer as kube-scheduler's type: passing nodes in the form the request used
// (NodeNames when asked with NodeNames, nodeCacheCapable; Nodes otherwise), failures in the
// two maps, a node's later mention winning when the request names it twice.
func (a *filterAnswer) result() *extenderv1.ExtenderFilterResult {
	res := &extenderv1.ExtenderFilterResult{FailedNodes: extenderv1.FailedNodesMap{}, FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{}, Error: a.err}
	if a.err != "" {
		return res
	}
	for i, fe := range a.failures {
		switch {
		case fe == nil:
		case fe.Unresolvable:
			res.FailedAndUnresolvableNodes[a.names[i]] = fe.Summary
		default:
			res.FailedNodes[a.names[i]] = fe.Summary
		}
	}
	if a.args.NodeNames != nil {
		out := a.passedNames()
		res.NodeNames = &out
		return res
	}
	res.Nodes = a.passedNodes()
	return res
}

// passedNames lists the passing candidates' names.
func (a *filterAnswer) passedNames() []string {
	out := make([]string, 0, countTrue(a.passed))
	for i, n := range a.names {
		if a.passes(i) {
			out = append(out, n)
		}
	}
	return out
}

// passedNodes lists the passing candidates' Node objects, for a request that sent them.
func (a *filterAnswer) passedNodes() *v1.NodeList {
	list := &v1.NodeList{}
	if a.args.Nodes != nil {
		for i := range a.args.Nodes.Items {
			if a.passes(i) {
				list.Items = append(list.Items, a.args.Nodes.Items[i])
			}
		}
	}
	return list
}

// passes reports whether the i-th candidate passes.
func (a *filterAnswer) passes(i int) bool { return i < len(a.passed) && a.passed[i] }

// failed counts the candidates that fail, unresolvably or not.
func (a *filterAnswer) failed() (unresolvable, full int) {
	for _, fe := range a.failures {
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

// countTrue counts the true elements of bs.
func countTrue(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}
