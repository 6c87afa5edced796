package framework

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ConnFront is a TCP front that balances per connection, as a Service does through kube-proxy:
// each connection it accepts goes to the next of its ready backends in turn (readiness as
// RoundRobin's: /readyz answering 200, probed every 200 ms; the next one in turn if none is
// ready), and its bytes are copied both ways unchanged. TLS therefore runs end to end between
// the client and the backend, which sees the client's certificate. A connection stays on its
// backend for its whole life, even once that backend is no longer ready, as conntrack keeps an
// established flow on its endpoint. kube-scheduler, which keeps its connections to the extender
// open, then sends all of one connection's calls to one replica.
type ConnFront struct {
	// Host is the front's host:port.
	Host string

	targets []string       // backends' host:port
	ready   func(int) bool // whether targets[i] is ready
	conns   []atomic.Int64 // connections each backend received
	ln      net.Listener
	stop    context.CancelFunc // stops the readiness probes

	mu     sync.Mutex
	turn   int                   // the target whose turn is next
	live   map[net.Conn]struct{} // both ends of every open connection
	closed bool
	wg     sync.WaitGroup
}

// StartConnFront serves a per-connection front over the extenders on a free loopback port. It
// holds no certificate: the extenders' TLS passes through it.
func (c *Cluster) StartConnFront(backends ...*Extender) (*ConnFront, error) {
	if len(backends) == 0 {
		return nil, errors.New("connection front without backends")
	}
	targets := make([]string, len(backends))
	for i, b := range backends {
		targets[i] = b.Host()
	}
	ready := make([]atomic.Bool, len(backends))
	for i := range ready {
		ready[i].Store(true)
	}
	f, err := startConnFront(targets, func(i int) bool { return ready[i].Load() })
	if err != nil {
		return nil, err
	}
	probeCtx, stop := context.WithCancel(context.Background())
	f.stop = stop
	go probeReady(probeCtx, "/readyz", backends, ready)
	return f, nil
}

// startConnFront listens on a free loopback port and balances the connections it accepts over
// targets (host:port), ready saying which are ready; it probes nothing itself.
func startConnFront(targets []string, ready func(int) bool) (*ConnFront, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("connection front: %w", err)
	}
	f := &ConnFront{Host: ln.Addr().String(), targets: targets, ready: ready, conns: make([]atomic.Int64, len(targets)),
		ln: ln, stop: func() {}, live: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

// pick returns the index of the next ready target in turn, or the next one in turn when none
// is ready.
func (f *ConnFront) pick() int {
	f.mu.Lock()
	first := f.turn
	f.turn = (f.turn + 1) % len(f.targets)
	f.mu.Unlock()
	for k := range f.targets {
		if i := (first + k) % len(f.targets); f.ready(i) {
			return i
		}
	}
	return first
}

// serve accepts connections until the listener is closed.
func (f *ConnFront) serve() {
	defer f.wg.Done()
	for {
		conn, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go f.forward(conn)
	}
}

// forward connects client to the next ready backend and copies bytes both ways until both
// directions end; it closes client if the backend cannot be reached (as a connection to a dead
// endpoint is refused).
func (f *ConnFront) forward(client net.Conn) {
	defer f.wg.Done()
	i := f.pick()
	backend, err := net.DialTimeout("tcp", f.targets[i], 5*time.Second)
	if err != nil {
		_ = client.Close()
		return
	}
	if !f.track(client, backend) {
		return
	}
	f.conns[i].Add(1)
	defer f.untrack(client, backend)
	splice(client, backend)
}

// track records an open connection's two ends so that Close can close them; after Close it
// closes them instead and returns false.
func (f *ConnFront) track(conns ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		f.live[c] = struct{}{}
	}
	return true
}

// untrack closes and forgets a connection's ends.
func (f *ConnFront) untrack(conns ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
		delete(f.live, c)
	}
}

// splice copies bytes between a and b both ways until both directions have ended: the clean
// end of one direction (EOF) is passed on as a half close, an error (a reset, a closed end)
// closes both.
func splice(a, b net.Conn) {
	done := make(chan struct{}, 2)
	pass := func(dst, src net.Conn) {
		_, err := io.Copy(dst, src)
		if hc, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
			_ = hc.CloseWrite()
		} else {
			_ = dst.Close()
			_ = src.Close()
		}
		done <- struct{}{}
	}
	go pass(a, b)
	go pass(b, a)
	<-done
	<-done
}

// Conns is how many connections each backend received, in the order of StartConnFront's
// backends.
func (f *ConnFront) Conns() []int {
	out := make([]int, len(f.conns))
	for i := range f.conns {
		out[i] = int(f.conns[i].Load())
	}
	return out
}

// Close stops accepting, closes every open connection and stops probing the backends.
func (f *ConnFront) Close() {
	f.stop()
	_ = f.ln.Close()
	f.mu.Lock()
	f.closed = true
	for c := range f.live {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
