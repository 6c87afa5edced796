// Package cache holds the extender's view of every GPU-sharing node: per GPU its capacity, model,
// health and the pods holding memory on it. It is state only: it never calls the API server and
// never does I/O under its lock, and it builds without client-go. The API feeds it through
// pkg/cache/feed; decisions live in pkg/placement, the verbs that use them in pkg/scheduler.
package cache

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// Cache is the extender's per-GPU view of the cluster. It is safe for concurrent use.
//
// A pod that asks gpu-mem goes through these states:
//
//	          AssumePod                 SetPod (informer: bound, with placement)
//	(none) ─────────────▶ Assumed ──────────────────────────────────────────▶ Bound
//	   ▲                    │ ForgetPod (bind failed)                            │
//	   └────────────────────┘                                                    │
//	   ▲  RemovePod (deleted) or SetPod with phase Succeeded/Failed              │
//	   └─────────────────────────────────────────────────────────────────────────┘
//
// SetPod for a pod bound to a node without a placement annotation (bound by another scheduler,
// or nodeName set by hand) records it as Bound with no placement: its units count against the
// node as pending instead of against a card. A terminating pod (deletionTimestamp set) keeps its
// memory until RemovePod or a terminal phase. Assumed and Bound pods are charged alike, so two
// binds racing for the last units of a card cannot both succeed.
//
// Getters return immutable snapshots: callers must not modify them, and a snapshot never changes
// after it is returned.
type Cache interface {
	// SetNode adds or updates a node from the API.
	SetNode(node *v1.Node)
	// RemoveNode forgets a node; pods recorded on it are kept until they are removed, and count
	// again if the node comes back.
	RemoveNode(name string)

	// SetPod records a pod as the API reports it (informer add/update).
	SetPod(pod *v1.Pod)
	// RemovePod forgets a deleted pod.
	RemovePod(pod *v1.Pod)
	// AssumePod charges alloc to nodeName for pod before it is bound. It checks again, under the
	// cache lock, that every GPU of alloc exists, is healthy, accepts req's models and has the
	// free units. If the pod is already Assumed or Bound on nodeName, it changes nothing and
	// returns the existing placement; on another node it fails with ErrPodOnOtherNode.
	AssumePod(pod *v1.Pod, req *contract.PodRequest, nodeName string, alloc contract.Allocation) (contract.Allocation, error)
	// ForgetPod drops an Assumed pod (its bind failed). Bound pods are not affected.
	ForgetPod(uid types.UID)
	// Pod returns what the cache holds for a pod.
	Pod(uid types.UID) (placement.PodInfo, bool)

	// Node returns a node's snapshot.
	Node(name string) (*placement.NodeInfo, bool)
	// NodeWithout returns a node's snapshot as if the given pods were gone (for preemption).
	NodeWithout(name string, uids []types.UID) (*placement.NodeInfo, bool)
	// Lookup returns the snapshots of the named nodes under one lock, nil for unknown names.
	Lookup(names []string) []*placement.NodeInfo
	// Visit calls visit(i, snapshot of names[i]) for each name in order, nil for an unknown
	// name. Snapshots are taken in small batches under the read lock and visited outside it,
	// so a pass over thousands of nodes neither holds the lock for long nor keeps a list of
	// them.
	Visit(names []string, visit func(i int, node *placement.NodeInfo))
	// Nodes returns every node's snapshot, sorted by name.
	Nodes() []*placement.NodeInfo

	// DRA mode (pkg/cache/feed's DRA feed): a node's cards come from its ResourceSlices and
	// what pods hold on them from their allocated ResourceClaims, not from annotations. A pod
	// of a DRA node asks no gpu-mem in its spec, so SetPod charges only its CPU and memory.

	// SetDRACards sets a node's cards from its ResourceSlices, in the order published; they
	// replace the inventory the Node object gives until RemoveDRACards.
	SetDRACards(node string, gpus []placement.GPUInfo)
	// RemoveDRACards forgets the cards of a node that no longer publishes any.
	RemoveDRACards(node string)
	// SetClaim charges (or charges anew) the cards an allocated claim holds to its pod.
	SetClaim(uid types.UID, charge ClaimCharge)
	// RemoveClaim releases a claim's charge (deallocated or deleted).
	RemoveClaim(uid types.UID)
}
