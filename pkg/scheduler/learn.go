package scheduler

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/gpushare/gpushare/pkg/placement"
)

// Relearn rebuilds a learning policy's distribution from the pods in the cache. Call it once
// the informers have synced (after a restart the pods already running are the best sample of
// the workload); it does nothing for other policies.
func (e *Extender) Relearn() {
	if l, ok := e.policy.(placement.Learner); ok {
		l.Rebuild(e.cache.Nodes())
	}
}

// SyncPolicy hands every node's snapshot to a policy that keeps per-node state (NodeSyncer),
// so that it forgets deleted nodes; it does nothing for other policies. In DRA mode, where the
// extender binds nothing and so teaches a learning policy no pod, it relearns from the pods
// the cache holds (their claims) instead. RunPolicySync calls it periodically.
func (e *Extender) SyncPolicy() {
	if e.dra {
		e.Relearn()
	}
	if s, ok := e.policy.(placement.NodeSyncer); ok {
		s.SyncNodes(e.cache.Nodes())
	}
}

// RunPolicySync calls SyncPolicy at once and then every period until ctx ends.
func (e *Extender) RunPolicySync(ctx context.Context, period time.Duration) {
	wait.UntilWithContext(ctx, func(context.Context) { e.SyncPolicy() }, period)
}
