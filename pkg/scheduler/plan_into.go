package scheduler

import (
	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
)

// PlanInto is PlanPod writing into p instead of allocating a Plan, for callers that plan a pod
// on many nodes (the trace simulator). p's previous contents are overwritten; a one-slot plan
// lives in p's own storage, so keep the *Plan, not a copy of it.
func PlanInto(node *cache.NodeInfo, req *contract.PodRequest, policy Policy, p *Plan) bool {
	return planInto(node, req, policy, p)
}
