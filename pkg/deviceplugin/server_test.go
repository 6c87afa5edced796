package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/fake"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// fakeRegistration is kubelet's Registration service on a unix socket.
type fakeRegistration struct {
	pluginapi.UnimplementedRegistrationServer
	reqs chan *pluginapi.RegisterRequest
	srv  *grpc.Server
}

func startRegistration(t *testing.T, sock string, reqs chan *pluginapi.RegisterRequest) *fakeRegistration {
	t.Helper()
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeRegistration{reqs: reqs, srv: grpc.NewServer()}
	pluginapi.RegisterRegistrationServer(f.srv, f)
	go func() { _ = f.srv.Serve(lis) }()
	t.Cleanup(f.srv.Stop)
	return f
}

func (f *fakeRegistration) Register(_ context.Context, r *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	f.reqs <- r
	return &pluginapi.Empty{}, nil
}

func TestRunRegistersServesAndWatchesHealth(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	dir := t.TempDir()
	reqs := make(chan *pluginapi.RegisterRequest, 4)
	kubelet := startRegistration(t, filepath.Join(dir, "kubelet.sock"), reqs)
	host, err := mockhost.New("dgxa100", mockhost.Options{GPUs: 2, MemoryBytes: 4 << 30, MemoryByIndex: map[int]uint64{1: 8 << 30}})
	if err != nil {
		t.Fatal(err)
	}
	pod := st.MakePod().Name("p").Node(testNode).NamedGPUMem("c", 3).Allocation(contract.Allocation{"0": {1: 3}}).Obj()
	client := k8sfake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}}, pod)
	p, err := New(nvml.New(host), client, WithNodeName(testNode), WithKubeletDir(dir), WithLogger(logger),
		WithPodSource(fake.ClientPods{Client: client, Node: testNode}), WithResyncPeriod(10*time.Millisecond), WithResolveWait(0))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()

	want := &pluginapi.RegisterRequest{Version: pluginapi.Version, Endpoint: "gpushare.sock", ResourceName: contract.DefaultResourceName,
		Options: &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}}
	if diff := cmp.Diff(want.String(), (<-reqs).String()); diff != "" {
		t.Errorf("Register (-want,+got):\n%s", diff)
	}
	stream, c := listAndWatch(t, ctx, filepath.Join(dir, "gpushare.sock"))
	if diff := cmp.Diff(map[string]int{"healthy@0": 4, "healthy@1": 8}, summarize(t, stream)); diff != "" {
		t.Errorf("devices (-want,+got):\n%s", diff)
	}
	allocateOverGRPC(t, ctx, c)
	host.InjectXID(0, 13) // application error on GPU 0: ignored
	host.InjectXID(1, 79) // fallen off the bus
	if diff := cmp.Diff(map[string]int{"healthy@0": 4, "Unhealthy@1": 8}, summarize(t, stream)); diff != "" {
		t.Errorf("devices after XID 79 (-want,+got):\n%s", diff)
	}
	numa0, numa1 := 0, 1
	wantGPUs := []contract.GPU{
		{Index: 0, UUID: uuid(0), Model: "Mock NVIDIA A100-SXM4-40GB", Units: 4, Healthy: true, MemoryLimit: contract.MemoryLimitNone,
			NUMA: &numa0, Links: "X NV12", TopologyVersion: contract.TopologyVersion, MemoryBytes: 4 << 30, UsableBytes: 4 << 30},
		{Index: 1, UUID: uuid(1), Model: "Mock NVIDIA A100-SXM4-40GB", Units: 8, Healthy: false, MemoryLimit: contract.MemoryLimitNone,
			NUMA: &numa1, Links: "NV12 X", TopologyVersion: contract.TopologyVersion, MemoryBytes: 8 << 30, UsableBytes: 8 << 30},
	}
	waitNode(t, ctx, client, wantGPUs)
	waitEvent(t, ctx, client, "p", ReasonGPUUnhealthy, "GPU 1 ("+uuid(1)+", Mock NVIDIA A100-SXM4-40GB) on node "+testNode+" had critical XID 79")

	kubelet.srv.Stop() // kubelet restarts: its socket goes away and comes back
	_ = os.Remove(filepath.Join(dir, "kubelet.sock"))
	startRegistration(t, filepath.Join(dir, "kubelet.sock"), reqs)
	if got := <-reqs; got.GetResourceName() != contract.DefaultResourceName {
		t.Errorf("re-registration for %q", got.GetResourceName())
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v after cancel, want nil", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "gpushare.sock")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("plugin socket still there after stop: %v", err)
	}
}

// allocateOverGRPC asks for 3 units as kubelet would and checks they land on GPU 1.
func allocateOverGRPC(t *testing.T, ctx context.Context, c pluginapi.DevicePluginClient) {
	t.Helper()
	var avail []string
	for g := range 2 {
		for n := range int64(4 + 4*g) {
			avail = append(avail, deviceID(uuid(g), n))
		}
	}
	pref, err := c.GetPreferredAllocation(ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
		{AvailableDeviceIDs: avail, AllocationSize: 3}}})
	if err != nil {
		t.Fatal(err)
	}
	ids := pref.GetContainerResponses()[0].GetDeviceIDs()
	if diff := cmp.Diff([]string{deviceID(uuid(1), 0), deviceID(uuid(1), 1), deviceID(uuid(1), 2)}, ids); diff != "" {
		t.Errorf("preferred IDs (-want,+got):\n%s", diff)
	}
	resp, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(env(uuid(1), "1", "3", "3", "8"), resp.GetContainerResponses()[0].GetEnvs()); diff != "" {
		t.Errorf("env (-want,+got):\n%s", diff)
	}
	if _, err := c.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}}); status.Code(err) != codes.NotFound {
		t.Errorf("second Allocate for the only pod = %v, want NotFound", err)
	}
}

func listAndWatch(t *testing.T, ctx context.Context, sock string) (grpc.ServerStreamingClient[pluginapi.ListAndWatchResponse], pluginapi.DevicePluginClient) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	c := pluginapi.NewDevicePluginClient(conn)
	opts, err := c.GetDevicePluginOptions(ctx, &pluginapi.Empty{}, grpc.WaitForReady(true))
	if err != nil || !opts.GetGetPreferredAllocationAvailable() {
		t.Fatalf("GetDevicePluginOptions = %v, %v", opts, err)
	}
	stream, err := c.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	return stream, c
}

// summarize counts the next ListAndWatch response's devices by health and NUMA node.
func summarize(t *testing.T, stream grpc.ServerStreamingClient[pluginapi.ListAndWatchResponse]) map[string]int {
	t.Helper()
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, d := range resp.GetDevices() {
		h := d.GetHealth()
		if h == pluginapi.Healthy {
			h = "healthy"
		}
		out[h+"@"+resource.NewQuantity(d.GetTopology().GetNodes()[0].GetID(), resource.DecimalSI).String()]++
	}
	return out
}

// waitNode waits until the node carries the wanted inventory and gpu-count.
func waitNode(t *testing.T, ctx context.Context, client *k8sfake.Clientset, want []contract.GPU) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		node, err := client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = node.Annotations[contract.DefaultNodeGPUsKey]
		got, err := contract.DecodeGPUs(last)
		count := node.Status.Capacity[contract.DefaultCountName]
		return err == nil && cmp.Equal(want, got) && count.Value() == int64(len(want)), nil
	})
	if err != nil {
		t.Fatalf("node never got the inventory %v; last annotation %s: %v", want, last, err)
	}
}

// waitEvent waits until pod has an event of reason whose message contains says.
func waitEvent(t *testing.T, ctx context.Context, client *k8sfake.Clientset, pod, reason, says string) {
	t.Helper()
	var last []string
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		evs, err := client.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		last = nil
		for _, ev := range evs.Items {
			last = append(last, ev.Reason+": "+ev.Message)
			if ev.InvolvedObject.Name == pod && ev.Reason == reason && ev.Type == v1.EventTypeWarning && strings.Contains(ev.Message, says) {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("pod %s never got a %s event saying %q; events: %q", pod, reason, says, last)
	}
}

func TestNewRefusesTooSmallUnit(t *testing.T) {
	host, err := mockhost.New("dgxh100", mockhost.Options{GPUs: 1})
	if err != nil {
		t.Fatal(err)
	}
	names := contract.DefaultNames()
	names.Unit = resource.MustParse("1Mi")
	_, err = New(nvml.New(host), k8sfake.NewClientset(), WithNodeName(testNode), WithNames(names),
		WithPodSource(fake.ClientPods{}))
	if !errors.Is(err, contract.ErrInvalidNames) {
		t.Errorf("New with 1Mi units on an 80 GiB card = %v, want ErrInvalidNames", err)
	}
	if _, err := New(nvml.New(host), k8sfake.NewClientset(), WithPodSource(fake.ClientPods{})); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New without node name = %v, want ErrInvalidConfig", err)
	}
}

// TestSocketIsPrivateWhateverTheUmask: the plugin's socket is 0600 even under umask 000 (it
// was 0777 then), and it accepts connections at its final path.
func TestSocketIsPrivateWhateverTheUmask(t *testing.T) {
	for _, umask := range []int{0o000, 0o022, 0o077} {
		t.Run(fmt.Sprintf("umask %03o", umask), func(t *testing.T) {
			old := syscall.Umask(umask)
			defer syscall.Umask(old)
			sock := filepath.Join(t.TempDir(), "gpushare.sock")
			lis, err := listenPrivate(sock)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = lis.Close() }()
			st, err := os.Stat(sock)
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Mode().Perm(); got != 0o600 {
				t.Errorf("socket mode %03o, want 600", got)
			}
			go func() {
				if c, err := lis.Accept(); err == nil {
					_ = c.Close()
				}
			}()
			c, err := net.Dial("unix", sock)
			if err != nil {
				t.Fatalf("dial the socket: %v", err)
			}
			_ = c.Close()
		})
	}
}
