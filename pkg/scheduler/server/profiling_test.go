package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

func TestServeProfilingRefusesNonLoopback(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "10.1.2.3:6060", "example.com:6060", "no-port"} {
		if err := server.ServeProfiling(context.Background(), addr); err == nil {
			t.Errorf("ServeProfiling(%q) = nil, want an error", addr)
		}
	}
}

func TestServeProfiling(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- server.ServeProfiling(ctx, addr) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("ServeProfiling after shutdown: %v", err)
		}
	}()
	var body string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
		if err != nil {
			continue
		}
		raw, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		body = string(raw)
		break
	}
	if !strings.Contains(body, "goroutine profile") {
		t.Errorf("goroutine profile not served; got %q", body)
	}
}
