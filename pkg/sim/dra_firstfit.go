package sim

import (
	"github.com/gpushare/gpushare/pkg/placement"
)

// CardOrder is the order in which a DRA driver publishes a node's cards
// (placement.CardOrder: the extender in DRA mode predicts the allocator with the same code).
type CardOrder = placement.CardOrder

// The card orders of a DRA variant (placement's).
const (
	CardOrderIndex    = placement.CardOrderIndex
	CardOrderTightest = placement.CardOrderTightest
	CardOrderEmptiest = placement.CardOrderEmptiest
)

// cardOrders lists the orders a variant may name.
func cardOrders() []CardOrder { return placement.CardOrders() }

// firstFit is the policy that plans a pod's cards as kube-scheduler's allocator chooses them
// under DRA and rates a node with inner's score of that plan (placement.PredictFirstFit); with
// a nil inner every node rates 0.
func firstFit(inner placement.Policy, order CardOrder) placement.Policy {
	return placement.PredictFirstFit(inner, order)
}
