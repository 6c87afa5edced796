package gpumem

// FitError says why a pod does not fit a node, in words for people. pkg/placement makes them
// (placement.FitError is this type); the extender's wire codec writes them.
type FitError struct {
	// Reason is the explanation for this node (bind errors, logs): its cards and free blocks.
	// Empty in the errors of placement.Summaries, which serve thousands of nodes.
	Reason string
	// Summary is the same reason in words that depend on the pod alone, so that kube-scheduler,
	// which counts identical reasons over the nodes, summarises a FailedScheduling event as
	// "0/1000 nodes are available: 700 GPU memory: no GPU has 4 GiB free, 300 ...".
	Summary string
	// Unresolvable is true when removing pods from the node would not help (no card is big
	// enough, too few cards, no card of an accepted model, all unhealthy).
	Unresolvable bool
}

// Error is the explanation for this node (Reason).
func (e *FitError) Error() string { return e.Reason }
