package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/scheduler/server"
	servertesting "github.com/gpushare/gpushare/pkg/scheduler/server/testing"
)

// fastElection elects within about a second, for tests (a Lease counts whole seconds).
func fastElection(identity string) server.ElectionConfig {
	return server.ElectionConfig{Namespace: "kube-system", Name: "gpushare-extender", Identity: identity,
		LeaseDuration: time.Second, RenewDeadline: 700 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}
}

// TestElectionOneLeaderAndFailover: of two replicas on one Lease exactly one leads; when it
// stops (releasing the Lease) the other takes over, and both agree on who leads.
func TestElectionOneLeaderAndFailover(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	client := fake.NewClientset()
	a, err := server.NewElector(client, fastElection("a"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := server.NewElector(client, fastElection("b"))
	if err != nil {
		t.Fatal(err)
	}
	actx, stopA := context.WithCancel(ctx)
	bctx, stopB := context.WithCancel(ctx)
	defer stopB()
	aDone := make(chan struct{})
	go func() { defer close(aDone); _ = a.Run(actx) }()
	servertesting.WaitFor(t, "a to lead", a.Leading)
	go func() { _ = b.Run(bctx) }()
	servertesting.WaitFor(t, "b to see a lead", func() bool { return b.Leader() == "a" })
	time.Sleep(500 * time.Millisecond) // several of b's retries
	if b.Leading() {
		t.Fatal("two replicas lead at once")
	}
	stopA()
	<-aDone
	if a.Leading() {
		t.Error("a still leads after it stopped")
	}
	took := servertesting.WaitFor(t, "b to take over", b.Leading)
	t.Logf("failover after a released the Lease: %v", took)
	if b.Leader() != "b" {
		t.Errorf("b sees %q lead", b.Leader())
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
	b, err := server.NewElector(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	bctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = b.Run(bctx) }()
	took := servertesting.WaitFor(t, "b to replace the dead leader", b.Leading)
	t.Logf("dead leader replaced after %v (lease %v, retry %v)", took, cfg.LeaseDuration, cfg.RetryPeriod)
	if took < cfg.LeaseDuration/2 {
		t.Errorf("b led after %v, before the dead leader's Lease of %v ran out", took, cfg.LeaseDuration)
	}
}

// TestElectorFenceLag: a replica that has just acquired the Lease leads only once the fence
// lag has passed on its own clock since its first Lease write of the term; renewals do not
// restart the wait. Its fence is the token it wrote ("holder/leaseTransitions") and expires
// lease duration - safety margin after its last write.
func TestElectorFenceLag(t *testing.T) {
	client := fake.NewClientset()
	clock := servertesting.NewFakeClock()
	acquired := clock.Now()
	cfg := servertesting.ShippedElection("a")
	cfg.FenceLag = 2 * time.Second
	_, ctx := ktesting.NewTestContext(t)
	el, err := server.NewElector(client, cfg, server.WithElectorClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	servertesting.RunElector(ctx, t, el)
	servertesting.WaitFor(t, "the Lease to be taken", func() bool {
		l, err := client.CoordinationV1().Leases(cfg.Namespace).Get(ctx, cfg.Name, metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == "a"
	})
	// client-go tells the elector it leads a moment after the Lease write: wait for its view
	servertesting.WaitFor(t, "the elector to know it leads", func() bool { return el.LagLeft() > 0 })
	for _, tc := range []struct {
		name      string
		step      time.Duration
		want      bool
		wantFence server.Fence
		wantLag   time.Duration // LagLeft
	}{
		{name: "just acquired", want: false, wantLag: 2 * time.Second},
		{name: "inside the lag", step: 1999 * time.Millisecond, want: false, wantLag: time.Millisecond},
		{name: "lag over", step: time.Millisecond, want: true, wantFence: server.Fence{Token: "a/0", Deadline: acquired.Add(6 * time.Second)}},
		{name: "fence expired", step: 4 * time.Second, want: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock.Step(tc.step)
			f, ok := el.Fence()
			if ok != tc.want || el.Leading() != tc.want {
				t.Fatalf("Fence() ok = %v, Leading() = %v, want %v", ok, el.Leading(), tc.want)
			}
			if got := el.LagLeft(); got != tc.wantLag {
				t.Errorf("LagLeft() = %v, want %v", got, tc.wantLag)
			}
			if diff := cmp.Diff(tc.wantFence, f, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
				t.Errorf("Fence() (-want,+got):\n%s", diff)
			}
		})
	}
	if _, err := server.NewElector(client, func() server.ElectionConfig { c := cfg; c.FenceLag = cfg.LeaseDuration; return c }()); err == nil {
		t.Error("NewElector accepted a fence lag of a whole lease duration")
	}
}
