package deviceplugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/fake"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// TestRunWaitsForTheKubeletDir: a plugin that starts before kubelet created its device-plugin
// directory waits for it and then registers, instead of exiting.
func TestRunWaitsForTheKubeletDir(t *testing.T) {
	logger, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	dir := filepath.Join(t.TempDir(), "device-plugins") // not there yet
	host, err := mockhost.New("dgxa100", mockhost.Options{GPUs: 1, MemoryBytes: 4 << 30})
	if err != nil {
		t.Fatal(err)
	}
	client := k8sfake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}})
	p, err := New(nvml.New(host), client, WithNodeName(testNode), WithKubeletDir(dir), WithLogger(logger),
		WithPodSource(fake.ClientPods{Client: client, Node: testNode}), WithResolveWait(0), WithHealthCheck(false))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
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
