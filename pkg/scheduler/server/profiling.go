package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
)

// ProfilingHandler serves Go's runtime profiles (CPU, heap, goroutines, ...) under
// /debug/pprof/, as kube-scheduler's --profiling does. It carries no authentication: serve it
// on its own loopback port (ServeProfiling), never on the extender's port.
func ProfilingHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// ServeProfiling serves ProfilingHandler on address until ctx is done; it refuses an address
// that is not on a loopback interface, since the profiles are not authenticated.
func ServeProfiling(ctx context.Context, address string) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("--profiling-address %q: %w", address, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--profiling-address %q: profiles are served without authentication, only on a loopback address (127.0.0.1:PORT)", address)
	}
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return fmt.Errorf("--profiling-address: %w", err)
	}
	return Serve(ctx, ln, ProfilingHandler())
}
