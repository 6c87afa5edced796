package dra

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/klog/v2/ktesting"
	drapbv1 "k8s.io/kubelet/pkg/apis/dra/v1"
	"k8s.io/utils/ptr"

	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	enforcefake "github.com/gpushare/gpushare/pkg/enforce/fake"
)

// TestRunServesKubelet: Run registers with kubelet (its registration socket answers, which
// is what device-plugin mode refuses to start next to), serves NodePrepareResources over its
// socket for a claim it reads from the API server, publishes the node's ResourceSlice, and
// stops when its context ends.
func TestRunServesKubelet(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	claim := makeClaim("c").device("gpu-1", 4*gib, 0).obj()
	client := k8sfake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, UID: "node-uid"}}, claim)
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	d, err := New(ctx, nvml.New(testHost(t)), client, cfg, WithMounter(&enforcefake.Mounter{}))
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan error, 1)
	go func() { stopped <- d.Run(ctx) }()

	socket := filepath.Join(cfg.PluginsDir, cfg.DriverName, "dra.sock")
	waitFor(ctx, t, "the DRA socket", func() bool { _, err := os.Stat(socket); return err == nil })
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	resp, err := drapbv1.NewDRAPluginClient(conn).NodePrepareResources(ctx, &drapbv1.NodePrepareResourcesRequest{
		Claims: []*drapbv1.Claim{{Namespace: claim.Namespace, Name: claim.Name, Uid: string(claim.UID)}}})
	if err != nil {
		t.Fatal(err)
	}
	got := resp.Claims[string(claim.UID)]
	if got == nil || got.Error != "" || len(got.Devices) != 1 || strings.Join(got.Devices[0].CdiDeviceIds, ",") != "gpushare.aliyun.com/gpu=uid-c" {
		t.Errorf("NodePrepareResources answered %v, want device gpu-1 with CDI device gpushare.aliyun.com/gpu=uid-c", got)
	}

	waitFor(ctx, t, "the node's ResourceSlice", func() bool {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
		return err == nil && len(list.Items) == 1 && len(list.Items[0].Spec.Devices) == 4
	})
	if err := CheckNoDRADriver(ctx, cfg.RegistryDir, cfg.DriverName); !errors.Is(err, ErrOtherMode) {
		t.Errorf("with the driver registered, device-plugin mode's check = %v, want %v", err, ErrOtherMode)
	}
	cancel()
	select {
	case err := <-stopped:
		if err != nil {
			t.Errorf("Run = %v after its context ended, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// waitFor polls cond until it holds, or fails the test after 30 seconds.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// TestRestartReadsBack: a restarted driver knows the claims it prepared from their CDI specs:
// it counts them (order, room) and unprepares them; a spec it cannot read is left alone.
func TestRestartReadsBack(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.DeviceOrder = OrderMostAllocated
	host := testHost(t)
	first := newTestDriver(t, cfg, host)
	kept := makeClaim("kept").device("gpu-3", 30*gib, 0).obj()
	first.mustPrepare(t, kept)
	junk := filepath.Join(cfg.CDIRoot, cfg.DriverName+"_claim_junk.json")
	if err := os.WriteFile(junk, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}

	again := newTestDriver(t, cfg, host)
	if err := again.publish(again.ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"gpu-3", "gpu-0", "gpu-1", "gpu-2"}, names(again.pub.devices(t))); diff != "" {
		t.Errorf("order after restart (-want,+got):\n%s", diff)
	}
	if err := again.prepare(t, makeClaim("late").device("gpu-3", 10*gib, 0).obj())["uid-late"]; !errors.Is(err, ErrOvercommit) {
		t.Errorf("a claim beyond what the restarted driver knows is on gpu-3: %v, want %v", err, ErrOvercommit)
	}
	counters := filepath.Join(cfg.Enforce.StateDir, "pods", string(kept.UID))
	if _, err := os.Stat(counters); err != nil {
		t.Errorf("the restarted driver removed a prepared claim's counters: %v", err)
	}
	unprepare(t, again, kept)
	if _, err := os.Stat(counters); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("counters still there after unprepare: %v", err)
	}
	if _, err := os.Stat(junk); err != nil {
		t.Errorf("an unreadable spec was removed: %v", err)
	}
}

// recoverable is an error kubeletplugin would report as one retrying may fix.
type recoverable struct{ error }

func (recoverable) Is(target error) bool { return target == kubeletplugin.ErrRecoverable }
func (r recoverable) Unwrap() error      { return r.error }

func TestHandleError(t *testing.T) {
	dropped := &resourceslice.DroppedFieldsError{PoolName: testNode,
		DesiredSlice: &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: []resourceapi.Device{{Name: "gpu-0",
			Capacity: map[resourceapi.QualifiedName]resourceapi.DeviceCapacity{CapacityMemory: memoryCapacity(2*gib, gib)}, AllowMultipleAllocations: ptr.To(true)}}}},
		ActualSlice: &resourceapi.ResourceSlice{Spec: resourceapi.ResourceSliceSpec{Devices: []resourceapi.Device{{Name: "gpu-0"}}}}}
	tests := []struct {
		name     string
		err      error
		wantStop string // part of the cause Run stops with; "" when it goes on
	}{
		{name: "a failed API call, retried", err: recoverable{errors.New("connection refused")}},
		{name: "dropped fields", err: recoverable{dropped}, wantStop: "needs a cluster with DRAConsumableCapacity"},
		{name: "a gRPC server failed", err: errors.New("listen: address in use"), wantStop: "address in use"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			run, stop := context.WithCancelCause(ctx)
			defer stop(nil)
			d := &Driver{fatal: stop}
			d.HandleError(ctx, tt.err, "publishing")
			cause := context.Cause(run)
			if tt.wantStop == "" && cause != nil || tt.wantStop != "" && (cause == nil || !strings.Contains(cause.Error(), tt.wantStop)) {
				t.Errorf("Run's cause %v, want one containing %q", cause, tt.wantStop)
			}
		})
	}
}
