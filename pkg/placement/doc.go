// Package placement decides where a pod's GPU memory goes, and nothing else: it imports neither
// net/http nor client-go. It holds the node snapshot placement reads (NodeInfo, built by
// pkg/cache), the planner (PlanPod), the explanation of a misfit (Explain), the policy
// interfaces (interface.go), the binpack, spread and random policies, and the decision pipeline
// (Decision: feasible → score → choose → assume) that the extender's verbs and the trace
// simulator share. The FGD policies live in placement/fgd, their names in placement/policies.
package placement
