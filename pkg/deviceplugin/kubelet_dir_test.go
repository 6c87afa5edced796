package deviceplugin

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/fake"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// runPlugin runs a plugin on one mocked GPU with its kubelet directory at dir; Run's result
// arrives on the channel.
func runPlugin(t *testing.T, ctx context.Context, dir string) <-chan error {
	t.Helper()
	host, err := mockhost.New("dgxa100", mockhost.Options{GPUs: 1, MemoryBytes: 4 << 30})
	if err != nil {
		t.Fatal(err)
	}
	client := k8sfake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}})
	p, err := New(nvml.New(host), client, WithNodeName(testNode), WithKubeletDir(dir), WithLogger(klog.FromContext(ctx)),
		WithPodSource(fake.ClientPods{Client: client, Node: testNode}), WithResolveWait(0), WithHealthCheck(false))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	return done
}

// TestRunWaitsForTheKubeletDir: a plugin that starts before kubelet created its device-plugin
// directory waits for it and then registers, instead of exiting.
func TestRunWaitsForTheKubeletDir(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	dir := filepath.Join(t.TempDir(), "device-plugins") // not there yet
	done := runPlugin(t, ctx, dir)
	select { // the plugin must still be running while the directory is missing
	case err := <-done:
		t.Fatalf("Run() = %v while kubelet's directory is missing, want it to wait", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	reqs := make(chan *pluginapi.RegisterRequest, 4)
	startRegistration(t, filepath.Join(dir, "kubelet.sock"), reqs)
	select {
	case r := <-reqs:
		if r.GetResourceName() != contract.DefaultResourceName {
			t.Errorf("registered %q", r.GetResourceName())
		}
	case err := <-done:
		t.Fatalf("Run() returned %v before kubelet's directory appeared", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v after cancel, want nil", err)
	}
}

// TestRegistersSoonAfterKubeletListens: kubelet's socket file exists (kubelet bound it) before
// kubelet accepts connections on it; the plugin's retries are close enough that it registers
// within about a second of kubelet listening (it waited a fixed 5 s before).
func TestRegistersSoonAfterKubeletListens(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	dir := t.TempDir()
	sock := filepath.Join(dir, "kubelet.sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: sock}); err != nil {
		t.Fatal(err)
	}
	done := runPlugin(t, ctx, dir)
	time.Sleep(6 * time.Second) // registrations are refused meanwhile; the old retry came at 5 s and 10 s
	if err := syscall.Listen(fd, 16); err != nil {
		t.Fatal(err)
	}
	listening := time.Now()
	f := os.NewFile(uintptr(fd), sock)
	lis, err := net.FileListener(f)
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	reqs := make(chan *pluginapi.RegisterRequest, 4)
	reg := &fakeRegistration{reqs: reqs, srv: grpc.NewServer()}
	pluginapi.RegisterRegistrationServer(reg.srv, reg)
	go func() { _ = reg.srv.Serve(lis) }()
	defer reg.srv.Stop()
	select {
	case <-reqs:
		took := time.Since(listening)
		t.Logf("registered %v after kubelet listened", took)
		if took > 2500*time.Millisecond { // the bound is 1 s; the slack is for a loaded machine
			t.Errorf("registered %v after kubelet listened, want about a second at most", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no registration 10 s after kubelet listened")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run() = %v after cancel, want nil", err)
	}
}
