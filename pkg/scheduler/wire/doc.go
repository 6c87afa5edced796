// Package wire reads and writes the JSON of kube-scheduler's HTTP extender protocol
// (k8s.io/kube-scheduler/extender/v1) for the extender's handlers: it decodes the requests
// (DecodeArgs for filter and prioritize, Decode for bind and preempt) and encodes filter's
// answer (FilterAnswer), into buffers a BufferPool hands out. The other answers (HostPriorityList, ExtenderBindingResult,
// ExtenderPreemptionResult) are small or off the default path, and go out as encoding/json
// writes kube-scheduler's types.
//
// Two parts are written by hand, because a benchmark of the default cycle (filter with
// --filter-chooses-node, at thousands of candidates) shows they pay: DecodeArgs reads the
// candidate names itself, and FilterAnswer.AppendJSON writes the failed nodes straight from
// the pass's verdicts. Both give what encoding/json gives (the errors of a body they decline
// are encoding/json's), except that the failed nodes are listed in the request's order.
package wire
