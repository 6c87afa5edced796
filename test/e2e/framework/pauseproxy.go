package framework

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// PausableProxy is a TCP proxy to one target that can simulate a network partition: Cut
// blackholes every connection (nothing passes either way, nothing is closed: both peers see
// silence, as when packets are dropped) and Restore heals it, closing what was cut (as the
// peers' TCP timeouts would have by then) and forwarding new connections again.
type PausableProxy struct {
	// Host is the proxy's host:port.
	Host string

	target string
	ln     net.Listener

	mu     sync.Mutex
	cut    bool
	closed bool
	pipes  map[*pipe]struct{} // connections forwarded (cut ones included, until Restore)
	held   []net.Conn         // connections accepted while cut: never forwarded
	wg     sync.WaitGroup
}

// pipe is one proxied connection: the client's end and the target's.
type pipe struct {
	client, server net.Conn
	// cut is set, under PausableProxy.mu, when the pipe is blackholed; its copiers stop then.
	cut bool
	// ended counts the directions that ended on their own (not cut), under PausableProxy.mu.
	ended int
}

// StartPausableProxy listens on a free loopback port and forwards each connection to target
// (host:port).
func StartPausableProxy(target string) (*PausableProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("pausable proxy: %w", err)
	}
	p := &PausableProxy{Host: ln.Addr().String(), target: target, ln: ln, pipes: map[*pipe]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// serve accepts connections until the listener is closed.
func (p *PausableProxy) serve() {
	defer p.wg.Done()
	for {
		conn, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.open(conn)
	}
}

// open forwards a new connection, or holds it silent while the proxy is cut.
func (p *PausableProxy) open(client net.Conn) {
	defer p.wg.Done()
	if p.hold(client) {
		return
	}
	server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	pp := &pipe{client: client, server: server}
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		_ = client.Close()
		_ = server.Close()
		return
	case p.cut: // cut while dialling: the partition came first
		p.held = append(p.held, client)
		p.mu.Unlock()
		_ = server.Close()
		return
	}
	p.pipes[pp] = struct{}{}
	p.wg.Add(2)
	p.mu.Unlock()
	go p.copy(pp, server, client)
	go p.copy(pp, client, server)
}

// hold keeps client, unread and open, if the proxy is cut (closes it if the proxy is closed)
// and says whether it did.
func (p *PausableProxy) hold(client net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		_ = client.Close()
		return true
	case p.cut:
		p.held = append(p.held, client)
		return true
	}
	return false
}

// copy carries bytes from src to dst until src ends or the pipe is cut. A cut stops it at
// once (Cut expires the deadlines of both ends) and leaves both ends open; an end of src is
// passed on as a half close, and the pipe is closed once both directions have ended.
func (p *PausableProxy) copy(pp *pipe, dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	var err error
	for err == nil {
		var n int
		n, err = src.Read(buf)
		if n > 0 && !p.isCut(pp) {
			if _, werr := dst.Write(buf[:n]); werr != nil && err == nil {
				err = werr
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pp.cut {
		return // blackholed: Restore or Close closes both ends
	}
	pp.ended++
	if hc, ok := dst.(interface{ CloseWrite() error }); ok && errors.Is(err, io.EOF) && pp.ended < 2 {
		_ = hc.CloseWrite()
		return
	}
	_ = pp.client.Close()
	_ = pp.server.Close()
	delete(p.pipes, pp)
}

// isCut says whether the pipe has been cut.
func (p *PausableProxy) isCut(pp *pipe) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return pp.cut
}

// Cut starts a partition: every open connection stops carrying bytes both ways but stays open,
// and new connections are accepted but carry nothing, until Restore.
func (p *PausableProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	now := time.Now()
	for pp := range p.pipes {
		pp.cut = true
		// wake the copiers blocked in Read or Write without closing anything
		_ = pp.client.SetDeadline(now)
		_ = pp.server.SetDeadline(now)
	}
}

// Restore ends a partition: it closes every connection the partition blackholed (both ends, as
// TCP timeouts would have during a long partition) and forwards new connections again.
func (p *PausableProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	p.closeCut()
}

// closeCut closes the cut pipes and the held connections; p.mu is held.
func (p *PausableProxy) closeCut() {
	for pp := range p.pipes {
		if pp.cut {
			_ = pp.client.Close()
			_ = pp.server.Close()
			delete(p.pipes, pp)
		}
	}
	for _, c := range p.held {
		_ = c.Close()
	}
	p.held = nil
}

// Close stops the proxy and closes every connection.
func (p *PausableProxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for pp := range p.pipes {
		pp.cut = true // its copiers stop without touching the pipe again
		_ = pp.client.Close()
		_ = pp.server.Close()
	}
	p.closeCut()
	p.mu.Unlock()
	p.wg.Wait()
}

// KubeconfigVia writes, next to c.Kubeconfig, a copy of it whose API server is reached at host
// (host:port, e.g. a PausableProxy's Host) and returns its path. The copy keeps the original's
// TLS settings: today insecure-skip-tls-verify, and were the certificate verified it would still
// hold, since TLS checks the host and not the port and kube-apiserver's self-signed serving
// certificate covers 127.0.0.1 (its --advertise-address and --bind-address, which
// SecureServingOptions.MaybeDefaultWithSelfSignedCerts adds to the certificate's IP SANs).
func (c *Cluster) KubeconfigVia(host string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return "", fmt.Errorf("kubeconfig via %s: %w", host, err)
	}
	if len(cfg.Clusters) == 0 {
		return "", fmt.Errorf("kubeconfig via %s: %s names no cluster", host, c.Kubeconfig)
	}
	for name, cl := range cfg.Clusters {
		u, err := url.Parse(cl.Server)
		if err != nil {
			return "", fmt.Errorf("kubeconfig via %s: cluster %s: %w", host, name, err)
		}
		u.Host = host
		cl.Server = u.String()
	}
	path := filepath.Join(filepath.Dir(c.Kubeconfig), "kubeconfig-via-"+strings.ReplaceAll(host, ":", "-"))
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("kubeconfig via %s: %w", host, err)
	}
	return path, nil
}
