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

// RoundRobin is an HTTP front that sends each request to the next of its backends in turn, as
// a Service with several ready endpoints does; kube-scheduler calls it as its extender.
type RoundRobin struct {
	// Host is the front's host:port.
	Host string
	srv  *http.Server
}

// StartRoundRobin serves a round-robin front over the extenders on a free loopback port. Like
// the extenders, it serves the cluster's certificate and requires a client certificate; it
// reaches them with theirs.
func (c *Cluster) StartRoundRobin(backends ...*Extender) (*RoundRobin, error) {
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
	var next atomic.Uint64
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(targets[(next.Add(1)-1)%uint64(len(targets))])
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
	rr := &RoundRobin{Host: ln.Addr().String(), srv: &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}}
	go func() { _ = rr.srv.Serve(ln) }()
	return rr, nil
}

// Close stops the front.
func (r *RoundRobin) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = r.srv.Shutdown(ctx)
}
