package framework

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"time"
)

// RoundRobin is an HTTP front that sends each request to the next of its ready backends in
// turn, as a Service does: a backend whose /readyz does not answer 200 is left out until it does
// (probed every 200 ms, as endpoints follow readiness probes), so that a dead replica stops
// receiving calls. kube-scheduler calls it as its extender.
type RoundRobin struct {
	// Host is the front's host:port.
	Host string
	srv  *http.Server
	stop context.CancelFunc
}

// StartRoundRobin serves a round-robin front over the extenders on a free loopback port. Like
// the extenders, it serves the cluster's certificate and requires a client certificate; it
// reaches them with theirs.
func (c *Cluster) StartRoundRobin(backends ...*Extender) (*RoundRobin, error) {
	return c.startRoundRobin("/readyz", backends)
}

// StartLeaderRoundRobin is StartRoundRobin checking /readyz/leader instead of /readyz, as a
// front that health-checks its backends itself is configured to (docs/design.md): it sends the
// calls to the leader alone, and to the next replica in turn while none answers 200.
func (c *Cluster) StartLeaderRoundRobin(backends ...*Extender) (*RoundRobin, error) {
	return c.startRoundRobin("/readyz/leader", backends)
}

func (c *Cluster) startRoundRobin(probe string, backends []*Extender) (*RoundRobin, error) {
	if len(backends) == 0 {
		return nil, errors.New("round robin without backends")
	}
	targets := make([]*url.URL, len(backends))
	for i, b := range backends {
		u, err := url.Parse(b.URL())
		if err != nil {
			return nil, err
		}
		targets[i] = u
	}
	ready := make([]atomic.Bool, len(backends))
	for i := range ready {
		ready[i].Store(true)
	}
	var next atomic.Uint64
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		i := (next.Add(1) - 1) % uint64(len(targets))
		for range targets { // the next ready backend; the next one in turn if none is ready
			if ready[i].Load() {
				break
			}
			i = (i + 1) % uint64(len(targets))
		}
		r.SetURL(targets[i])
	}, Transport: backends[0].Client.Transport}
	serving, err := tls.LoadX509KeyPair(c.PKI.ServerCert, c.PKI.ServerKey)
	if err != nil {
		return nil, fmt.Errorf("round robin: %w", err)
	}
	clients, err := c.PKI.ClientTLS(false)
	if err != nil {
		return nil, fmt.Errorf("round robin: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("round robin: %w", err)
	}
	ln = tls.NewListener(ln, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{serving},
		ClientCAs: clients.RootCAs, ClientAuth: tls.RequireAndVerifyClientCert})
	probeCtx, stop := context.WithCancel(context.Background())
	go probeReady(probeCtx, probe, backends, ready)
	rr := &RoundRobin{Host: ln.Addr().String(), srv: &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}, stop: stop}
	go func() { _ = rr.srv.Serve(ln) }()
	return rr, nil
}

// probeReady sets ready[i] to whether backends[i] answers path (/readyz, /readyz/leader) with
// 200, every 200 ms until ctx is done.
func probeReady(ctx context.Context, path string, backends []*Extender, ready []atomic.Bool) {
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		for i, b := range backends {
			pctx, cancel := context.WithTimeout(ctx, time.Second)
			var body map[string]string
			ready[i].Store(b.GetJSON(pctx, path, &body) == nil)
			cancel()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close stops the front.
func (r *RoundRobin) Close() {
	r.stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}
