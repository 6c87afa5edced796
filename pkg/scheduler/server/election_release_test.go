package server

import (
	"context"
	"errors"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/ptr"
)

// TestReleaseKeepsAnotherHoldersLease: client-go's release after a failed renewal (a replica
// resumed after a long pause) reads the Lease, then writes an empty holder if its stale
// observed record says it leads. The lock refuses that write when the Lease it just read names
// another replica, and lets a replica release its own.
func TestReleaseKeepsAnotherHoldersLease(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		holder  string
		release bool
	}{{"ext-b", false}, {"ext-a", true}} {
		client := fake.NewClientset(&coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "gpushare-extender"},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(tc.holder), LeaseDurationSeconds: ptr.To[int32](8)},
		})
		e, err := NewElector(client, ElectionConfig{Namespace: "kube-system", Name: "gpushare-extender", Identity: "ext-a",
			LeaseDuration: 8 * time.Second, RenewDeadline: 5 * time.Second, RetryPeriod: time.Second, SafetyMargin: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		lock := &renewLock{Interface: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: "kube-system", Name: "gpushare-extender"},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: "ext-a"},
		}, elector: e}
		if _, _, err := lock.Get(ctx); err != nil {
			t.Fatal(err)
		}
		now := metav1.Now()
		err = lock.Update(ctx, resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1, RenewTime: now, AcquireTime: now})
		lease, gerr := client.CoordinationV1().Leases("kube-system").Get(ctx, "gpushare-extender", metav1.GetOptions{})
		if gerr != nil {
			t.Fatal(gerr)
		}
		got := ptr.Deref(lease.Spec.HolderIdentity, "")
		switch {
		case tc.release && (err != nil || got != ""):
			t.Errorf("own Lease: release = %v, holder %q; want released", err, got)
		case !tc.release && (!errors.Is(err, errNotHolder) || got != tc.holder):
			t.Errorf("Lease of %s: release = %v, holder %q; want refused, holder kept", tc.holder, err, got)
		}
	}
}
