package placement

import "github.com/gpushare/gpushare/pkg/gpumem"

// This file holds every interface of a placement policy: the Policy and the pod-scoped Scorer
// every policy has, and the optional extensions a policy or scorer may add. Callers find the
// optional ones by type assertion; each implementation is checked with a `var _ I = (*T)(nil)`
// line beside it.

// PodResources is what a pod asks of a node besides GPU memory, as kube-scheduler counts it.
type PodResources struct {
	// MilliCPU is the pod's CPU request in millicores.
	MilliCPU int64
	// Memory is the pod's memory request in bytes.
	Memory int64
}

// Policy is a placement policy: how a pod's cards are chosen on a node and how good a node is.
// Every caller that ranks or scores a pod (the extender's filter, prioritize, bind and preempt,
// and the trace simulator) goes through the Scorer that ForPod returns for that pod, through a
// Decision, so that the same pod is never ranked two ways. A Policy is safe for concurrent use.
type Policy interface {
	// Name is the policy's flag value.
	Name() string
	// ForPod returns the policy's scorer for one pod with resources res. A scorer serves one
	// placement decision and is used by one goroutine only.
	ForPod(res PodResources) Scorer
}

// Scorer ranks the cards of a node and scores the node for one pod.
type Scorer interface {
	// RankGPU is the sort key for putting units on GPU position g of node; cards with lower
	// keys are tried first. Only cards that fit are ranked.
	RankGPU(node *NodeInfo, g int, units int64, req *gpumem.PodRequest) float64
	// ScoreNode rates node with plan applied; higher is better. Scores of different nodes for
	// the same pod are compared with each other only.
	ScoreNode(node *NodeInfo, plan *Plan, req *gpumem.PodRequest) float64
}

// FreeOrderer is an optional Scorer extension for scorers whose RankGPU orders a node's cards
// by their free units alone: ascending (tightest first) or, when EmptiestFirst, descending.
// The planner then compares free units directly instead of calling RankGPU for every card.
type FreeOrderer interface {
	Scorer
	// EmptiestFirst is true when the card with the most free units ranks first.
	EmptiestFirst() bool
}

// CardPicker is an optional Scorer extension for scorers that remember which card of a node
// the planner chose for a one-card container (the choice depends on the node's snapshot and
// the pod's shape only), so that planning the same shape again on the same snapshot skips the
// ranking.
type CardPicker interface {
	Scorer
	// PickedCard returns the card remembered for units on node, if any.
	PickedCard(node *NodeInfo, units int64, req *gpumem.PodRequest) (g int, known bool)
	// CardPicked remembers that the planner chose card g (-1: none) for units on node.
	CardPicked(node *NodeInfo, units int64, req *gpumem.PodRequest, g int)
}

// Learner is an optional Policy extension for policies that learn the workload. The extender
// calls Observe once per pod, after its Binding succeeded; the simulator calls it when a pod
// is submitted. Rebuild replaces what was learned with the pods on nodes (after a restart).
type Learner interface {
	Policy
	// Observe learns one pod.
	Observe(req *gpumem.PodRequest, res PodResources)
	// Rebuild relearns from the pods placed on nodes.
	Rebuild(nodes []*NodeInfo)
}

// LearnedReporter is an optional Learner extension that says what the policy has learned, for
// metrics.
type LearnedReporter interface {
	Learner
	// Learned returns the task shapes remembered and the task types in the typical set the
	// policy currently scores against.
	Learned() (shapes, typical int)
}

// NodeSyncer is an optional Policy extension for policies that keep state per node. The
// extender hands it every node's snapshot once its informers have synced, and again now and
// then, so that the policy counts nodes it has not scored yet and drops deleted ones.
type NodeSyncer interface {
	Policy
	// SyncNodes makes the policy's per-node state match nodes.
	SyncNodes(nodes []*NodeInfo)
}

// Seeded is an optional Policy extension for randomised policies: Seed restarts their random
// stream, so that a simulation is reproducible.
type Seeded interface {
	Policy
	// Seed restarts the random stream.
	Seed(seed uint64)
}

// Demand is one pod of a workload: its GPU request and its other resources.
type Demand struct {
	// Req is the pod's GPU-memory request.
	Req gpumem.PodRequest
	// Res is the pod's CPU and memory.
	Res PodResources
}

// Oracle is an optional Policy extension for policies that take the workload from outside, as
// FGD does from the trace it is evaluated on (the simulator tells it the whole trace).
type Oracle interface {
	Policy
	// Foresee tells the policy the workload to come.
	Foresee(workload []Demand)
}
