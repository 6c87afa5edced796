package usage

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
)

// TestServe: /metrics serves the last reading over HTTP with the Go runtime's metrics, and the
// server stops when its context ends.
func TestServe(t *testing.T) {
	f := newFixture(t)
	f.host.SetUsage(0, 50, []gonvml.ProcessInfo{{Pid: 1, UsedGpuMemory: gib}})
	if _, err := f.s.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, l, f.s) }()
	resp, err := http.Get("http://" + l.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	for _, want := range []string{
		`gpushare_gpu_memory_used_bytes{gpu="0",model="Mock NVIDIA A100-SXM4-40GB",uuid="` + uuid0 + `"} 1.073741824e+09`,
		`gpushare_gpu_memory_outside_pods_bytes{gpu="0",model="Mock NVIDIA A100-SXM4-40GB",uuid="` + uuid0 + `"} 1.073741824e+09`,
		"go_goroutines ",
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if _, err := Listen(l.Addr().String()); err == nil {
		t.Error("a second Listen on a port in use succeeded")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
