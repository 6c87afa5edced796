package scheduler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/scheduler"
)

// fastElection elects within about a second, for tests (a Lease counts whole seconds).
func fastElection(identity string) scheduler.ElectionConfig {
	return scheduler.ElectionConfig{Namespace: "kube-system", Name: "gpushare-extender", Identity: identity,
		LeaseDuration: time.Second, RenewDeadline: 700 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > 5*time.Second {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// TestElectionOneLeaderAndFailover: of two replicas on one Lease exactly one leads; when it
// stops (releasing the Lease) the other takes over, and both agree on who leads.
func TestElectionOneLeaderAndFailover(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	a, err := scheduler.NewElector(client, fastElection("a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := scheduler.NewElector(client, fastElection("b"))
	if err != nil {
		t.Fatal(err)
	}
	actx, stopA := context.WithCancel(ctx)
	bctx, stopB := context.WithCancel(ctx)
	defer stopB()
	aDone := make(chan struct{})
	go func() { defer close(aDone); _ = a.Run(actx) }()
	waitFor(t, "a to lead", a.Leading)
	go func() { _ = b.Run(bctx) }()
	waitFor(t, "b to see a lead", func() bool { return b.Leader() == "a" })
	time.Sleep(500 * time.Millisecond) // several of b's retries
	if b.Leading() {
		t.Fatal("two replicas lead at once")
	}
	stopA()
	<-aDone
	if a.Leading() {
		t.Error("a still leads after it stopped")
	}
	took := waitFor(t, "b to take over", b.Leading)
	t.Logf("failover after a released the Lease: %v", took)
	if b.Leader() != "b" {
		t.Errorf("b sees %q lead", b.Leader())
	}
}

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
	if !errors.Is(err, scheduler.ErrNotLeader) {
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

// TestElectionReplacesADeadLeader: a leader that died without releasing its Lease is replaced
// once the Lease has run out: after LeaseDuration, within another RetryPeriod or two.
func TestElectionReplacesADeadLeader(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	cfg := fastElection("b")
	dead := "dead"
	secs := int32(1) // fastElection's LeaseDuration in whole seconds
	now := metav1.NewMicroTime(time.Now())
	if _, err := client.CoordinationV1().Leases(cfg.Namespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &dead, LeaseDurationSeconds: &secs, AcquireTime: &now, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	b, err := scheduler.NewElector(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	bctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = b.Run(bctx) }()
	took := waitFor(t, "b to replace the dead leader", b.Leading)
	t.Logf("dead leader replaced after %v (lease %v, retry %v)", took, cfg.LeaseDuration, cfg.RetryPeriod)
	if took < cfg.LeaseDuration/2 {
		t.Errorf("b led after %v, before the dead leader's Lease of %v ran out", took, cfg.LeaseDuration)
	}
}
