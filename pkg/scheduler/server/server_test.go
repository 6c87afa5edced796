package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

// TestServeShutsDownGracefully: cancelling the context stops accepting connections, lets the
// request in flight finish, and Serve returns nil.
func TestServeShutsDownGracefully(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	inFlight, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inFlight)
		<-release
		_, _ = io.WriteString(w, "done")
	})
	served := make(chan error, 1)
	go func() { served <- server.Serve(ctx, ln, h) }()
	answer := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String() + "/")
		if err != nil {
			answer <- "error: " + err.Error()
			return
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		answer <- string(b)
	}()
	<-inFlight
	cancel()
	// New connections are refused once the listener is closed.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			break
		}
		_ = c.Close()
		if time.Now().After(deadline) {
			t.Fatal("listener still accepts connections after shutdown began")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	if got := <-answer; got != "done" {
		t.Errorf("in-flight request got %q, want %q", got, "done")
	}
	if err := <-served; err != nil {
		t.Errorf("Serve() = %v, want nil", err)
	}
}
