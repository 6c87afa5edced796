package wire

import (
	"encoding/json"
	"slices"

	v1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/gpumem"
)

// FilterAnswer is a filter pass's verdict on each candidate, in the request's order, before it
// takes the wire's form: Result builds kube-scheduler's type, AppendJSON writes its JSON
// straight from the verdicts (no map of thousands of failed nodes built, hashed and sorted
// for a pod that fits nowhere). Both say the same. The slices may belong to the pass: neither
// method keeps them.
type FilterAnswer struct {
	// Args is the request answered: the answer lists the passing nodes in NodeNames when it
	// has NodeNames (nodeCacheCapable), in Nodes (its Node objects) otherwise.
	Args *extenderv1.ExtenderArgs
	// Names are the candidates, in the request's order.
	Names []string
	// Passed[i] reports whether Names[i] passes; nil when none does.
	Passed []bool
	// Failures[i] says why Names[i] fails, nil when it passes or when the pass gives no reason
	// (the nodes a choosing filter did not choose); Failures may be nil.
	Failures []*gpumem.FitError
	// Err is the answer's Error; the answer then lists no node, passed or failed.
	Err string
}

// Result is the answer as kube-scheduler's type: passing nodes in the form the request used,
// failures in the two maps, a node's later mention winning when the request names it twice.
// The reasons and Error have their "%" doubled (EscapeFormat), as kube-scheduler reads them.
func (a *FilterAnswer) Result() *extenderv1.ExtenderFilterResult {
	res := &extenderv1.ExtenderFilterResult{FailedNodes: extenderv1.FailedNodesMap{}, FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{}, Error: EscapeFormat(a.Err)}
	if a.Err != "" {
		return res
	}
	for i, fe := range a.Failures {
		switch {
		case fe == nil:
		case fe.Unresolvable:
			res.FailedAndUnresolvableNodes[a.Names[i]] = EscapeFormat(fe.Summary)
		default:
			res.FailedNodes[a.Names[i]] = EscapeFormat(fe.Summary)
		}
	}
	if a.Args.NodeNames != nil {
		out := a.passedNames()
		res.NodeNames = &out
		return res
	}
	res.Nodes = a.passedNodes()
	return res
}

// AppendJSON appends the answer's JSON to b: what json.Marshal gives for Result() (the same
// fields in the same order, strings escaped as encoding/json escapes them, HTML characters
// included), except that the failed nodes come in the request's order rather than sorted.
func (a *FilterAnswer) AppendJSON(b []byte) ([]byte, error) {
	b = slices.Grow(b, a.size())
	b = append(b, `{"Nodes":`...)
	if a.Err != "" || a.Args.NodeNames != nil {
		b = append(b, "null"...)
	} else {
		raw, err := json.Marshal(a.passedNodes())
		if err != nil {
			return nil, err
		}
		b = append(b, raw...)
	}
	b = append(b, `,"NodeNames":`...)
	if a.Err != "" || a.Args.NodeNames == nil {
		b = append(b, "null"...)
	} else {
		b = a.appendPassedNames(b)
	}
	b = append(b, `,"FailedNodes":`...)
	b = a.appendFailed(b, false)
	b = append(b, `,"FailedAndUnresolvableNodes":`...)
	b = a.appendFailed(b, true)
	b = append(b, `,"Error":`...)
	b = appendJSONString(b, EscapeFormat(a.Err))
	return append(b, '}'), nil
}

// appendPassedNames appends the passing candidates' names as a JSON array.
func (a *FilterAnswer) appendPassedNames(b []byte) []byte {
	b = append(b, '[')
	first := true
	for i, n := range a.Names {
		if !a.passes(i) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendJSONString(b, n)
	}
	return append(b, ']')
}

// appendFailed appends the failed candidates whose failure is unresolvable (or not) as a JSON
// object of node name to reason, in the request's order.
func (a *FilterAnswer) appendFailed(b []byte, unresolvable bool) []byte {
	b = append(b, '{')
	first := true
	if a.Err == "" {
		for i, fe := range a.Failures {
			if fe == nil || fe.Unresolvable != unresolvable {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendJSONString(b, a.Names[i])
			b = append(b, ':')
			b = appendJSONString(b, EscapeFormat(fe.Summary))
		}
	}
	return append(b, '}')
}

// size is about the length of the answer's JSON without Nodes (exact when no string needs
// escaping), so that it is written into one buffer.
func (a *FilterAnswer) size() int {
	n := 128 + len(a.Err)
	for i, name := range a.Names {
		switch {
		case a.passes(i):
			n += len(name) + 3
		case i < len(a.Failures) && a.Failures[i] != nil:
			n += len(name) + len(a.Failures[i].Summary) + 6
		}
	}
	return n
}

// passedNames lists the passing candidates' names.
func (a *FilterAnswer) passedNames() []string {
	n := 0
	for i := range a.Names {
		if a.passes(i) {
			n++
		}
	}
	out := make([]string, 0, n)
	for i, n := range a.Names {
		if a.passes(i) {
			out = append(out, n)
		}
	}
	return out
}

// passedNodes lists the passing candidates' Node objects, for a request that sent them.
func (a *FilterAnswer) passedNodes() *v1.NodeList {
	list := &v1.NodeList{}
	if a.Args.Nodes != nil {
		for i := range a.Args.Nodes.Items {
			if a.passes(i) {
				list.Items = append(list.Items, a.Args.Nodes.Items[i])
			}
		}
	}
	return list
}

// passes reports whether the i-th candidate passes.
func (a *FilterAnswer) passes(i int) bool { return i < len(a.Passed) && a.Passed[i] }
