package framework

import (
	"fmt"
	"net"
	"sync"
	"time"
)

// HoldingProxy is a TCP proxy to one target that can hold what its clients send: while held,
// nothing a client writes reaches the target (the bytes wait in the proxy and in the sockets'
// buffers, in order, connections stay open), and Release sends it all on. What the target
// sends back passes at all times. It models a client whose requests were built and written
// but reach the API server late (a paused process, a congested link).
type HoldingProxy struct {
	// Host is the proxy's host:port.
	Host string

	target string
	ln     net.Listener

	mu     sync.Mutex
	cond   *sync.Cond // signalled when held or closed changes; guarded by mu
	held   bool
	closed bool
	// waiting counts the reads whose bytes are held now; guarded by mu.
	waiting int
	conns   []net.Conn
	wg      sync.WaitGroup
}

// StartHoldingProxy listens on a free loopback port and forwards each connection to target
// (host:port).
func StartHoldingProxy(target string) (*HoldingProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("holding proxy: %w", err)
	}
	p := &HoldingProxy{Host: ln.Addr().String(), target: target, ln: ln}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// serve accepts connections until the listener is closed.
func (p *HoldingProxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.DialTimeout("tcp", p.target, 5*time.Second)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = client.Close()
			_ = server.Close()
			return
		}
		p.conns = append(p.conns, client, server)
		p.wg.Add(2)
		p.mu.Unlock()
		go p.copy(server, client, true)
		go p.copy(client, server, false)
	}
}

// copy carries bytes from src to dst until either ends; upstream (client to target) bytes
// wait while the proxy holds.
func (p *HoldingProxy) copy(dst, src net.Conn, upstream bool) {
	defer p.wg.Done()
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && upstream && !p.wait() {
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// wait blocks while the proxy holds; false when it was closed.
func (p *HoldingProxy) wait() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held && !p.closed {
		p.waiting++
		defer func() { p.waiting-- }()
	}
	for p.held && !p.closed {
		p.cond.Wait()
	}
	return !p.closed
}

// Waiting is how many writes of the clients the proxy holds now (one per connection at most:
// a connection's later bytes wait behind its first held write).
func (p *HoldingProxy) Waiting() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waiting
}

// Hold starts holding what the clients send.
func (p *HoldingProxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = true
}

// Release sends on everything held, in order, and stops holding.
func (p *HoldingProxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.held = false
	p.cond.Broadcast()
}

// Close stops the proxy and closes every connection.
func (p *HoldingProxy) Close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
