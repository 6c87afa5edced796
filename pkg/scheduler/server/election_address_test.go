package server_test

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"github.com/gpushare/gpushare/pkg/scheduler/server"
	servertesting "github.com/gpushare/gpushare/pkg/scheduler/server/testing"
)

// TestElectorLeaderAddress: a follower forwards to the address the Lease's holder advertises
// (holder "identity@host:port") only while it sees the Lease renewed: once the record has not
// changed for the renew deadline by the follower's clock (the leader is paused or cut off), it
// names no address, and a renewal makes it current again. A leader names none (it binds
// itself), nor does a holder without an address.
func TestElectorLeaderAddress(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cfg := server.DefaultElectionConfig()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: cfg.Namespace, Name: cfg.Name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a@10.0.0.1:39999"), LeaseDurationSeconds: ptr.To[int32](8),
			AcquireTime: &metav1.MicroTime{Time: time.Now()}, RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	client := fake.NewClientset(lease)
	clock := servertesting.NewFakeClock()
	cfg.Identity, cfg.Address, cfg.RetryPeriod = "b", "10.0.0.2:39999", 100*time.Millisecond
	b, err := server.NewElector(client, cfg, server.WithElectorClock(clock.Now))
	if err != nil {
		t.Fatal(err)
	}
	servertesting.RunElector(ctx, t, b)

	servertesting.WaitFor(t, "the follower to see a's address", func() bool { return b.LeaderAddress() == "10.0.0.1:39999" })
	if b.Leading() {
		t.Fatal("b leads while a's Lease is current")
	}
	clock.Step(cfg.RenewDeadline)
	if got := b.LeaderAddress(); got != "" {
		t.Errorf("LeaderAddress() = %q after the Lease went unrenewed for the renew deadline, want none", got)
	}
	renew := func(holder string) {
		l, err := client.CoordinationV1().Leases(cfg.Namespace).Get(ctx, cfg.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		l.Spec.HolderIdentity, l.Spec.RenewTime = ptr.To(holder), &metav1.MicroTime{Time: time.Now().Add(time.Second)}
		if _, err := client.CoordinationV1().Leases(cfg.Namespace).Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	renew("a@10.0.0.1:39999")
	servertesting.WaitFor(t, "the renewal to make a's address current again", func() bool { return b.LeaderAddress() == "10.0.0.1:39999" })
	renew("a") // a holder that advertises no address
	servertesting.WaitFor(t, "a holder without an address to name none", func() bool { return b.LeaderAddress() == "" && b.Leader() == "a" })
}

// TestElectorAdvertisesAddress: a leader names itself identity@address in the Lease.
func TestElectorAdvertisesAddress(t *testing.T) {
	client := fake.NewClientset()
	_, ctx := ktesting.NewTestContext(t)
	cfg := servertesting.ShippedElection("a")
	cfg.Address = "10.0.0.1:39999"
	el, err := server.NewElector(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	servertesting.RunElector(ctx, t, el)
	servertesting.WaitFor(t, "the elector to lead", el.Leading)
	l, err := client.CoordinationV1().Leases(cfg.Namespace).Get(ctx, cfg.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := ptr.Deref(l.Spec.HolderIdentity, ""); got != "a@10.0.0.1:39999" {
		t.Errorf("Lease holder = %q, want a@10.0.0.1:39999", got)
	}
	if got := el.LeaderAddress(); got != "" {
		t.Errorf("a leader's LeaderAddress() = %q, want none (it binds itself)", got)
	}
	cfg.Address = "x@y:1"
	if _, err := server.NewElector(client, cfg); err == nil {
		t.Error("NewElector accepted an address with an @")
	}
}
