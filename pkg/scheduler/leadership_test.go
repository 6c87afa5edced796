package scheduler_test

import (
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/scheduler"
	"github.com/gpushare/gpushare/pkg/scheduler/fence"
)

// follower never leads.
type follower struct{}

func (follower) Leading() bool  { return false }
func (follower) Leader() string { return "other" }

// TestFollowerRefusesBinds: a replica that does not lead answers filter but refuses every bind
// without touching its cache or the API, so that kube-scheduler retries against the leader.
func TestFollowerRefusesBinds(t *testing.T) {
	nodes := []*v1.Node{st.MakeNode("n1").GPUs(16).Obj()}
	e := newEnv(t, "binpack", nodes, st.MakePod().Name("p").GPUMem(4).Obj())
	ext := scheduler.NewExtender(e.cache, e.client, newPolicy(t, "binpack"), contract.DefaultNames(), scheduler.WithLeadership(follower{}))
	err := ext.Bind(e.ctx, bindArgs("p", "n1"))
	if !errors.Is(err, fence.ErrNotLeader) {
		t.Fatalf("Bind() on a follower = %v, want ErrNotLeader", err)
	}
	if got := e.apiPod(t, "p"); got.Spec.NodeName != "" || len(got.Annotations) != 0 {
		t.Errorf("a follower's refused bind changed the pod: node %q, annotations %v", got.Spec.NodeName, got.Annotations)
	}
	if n, _ := e.cache.Node("n1"); n.GPUs[0].Used != 0 {
		t.Errorf("a follower's refused bind charged %d units", n.GPUs[0].Used)
	}
	if ext.Leading() {
		t.Error("Leading() = true on a follower")
	}
}
