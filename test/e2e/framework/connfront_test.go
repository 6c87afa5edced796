package framework

import (
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// silence is how long a cut connection must stay silent.
const silence = 300 * time.Millisecond

// echoServer is a TCP server on loopback that writes greeting (if any) on each connection and
// then echoes what it reads; closed receives one value per connection it saw end.
type echoServer struct {
	addr   string
	closed chan struct{}
}

func startEcho(t *testing.T, greeting string) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	s := &echoServer{addr: ln.Addr().String(), closed: make(chan struct{}, 100)}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { s.closed <- struct{}{} }()
				defer func() { _ = conn.Close() }()
				if _, err := io.WriteString(conn, greeting); err != nil {
					return
				}
				_, _ = io.Copy(conn, conn)
			}()
		}
	}()
	return s
}

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// readN reads n bytes from conn within d.
func readN(conn net.Conn, n int, d time.Duration) (string, error) {
	if err := conn.SetReadDeadline(time.Now().Add(d)); err != nil {
		return "", err
	}
	buf := make([]byte, n)
	got, err := io.ReadFull(conn, buf)
	return string(buf[:got]), err
}

// echo writes msg to conn and expects it back within 2 s.
func echo(t *testing.T, conn net.Conn, msg string) {
	t.Helper()
	if _, err := io.WriteString(conn, msg); err != nil {
		t.Fatalf("write: %v", err)
	}
	got, err := readN(conn, len(msg), 2*time.Second)
	if err != nil || got != msg {
		t.Fatalf("echo of %q: got %q, %v", msg, got, err)
	}
}

// expectSilence writes msg to conn and expects no answer, and no close, within silence.
func expectSilence(t *testing.T, conn net.Conn, msg string) {
	t.Helper()
	if _, err := io.WriteString(conn, msg); err != nil {
		t.Fatalf("write to a cut connection: %v (it must stay open)", err)
	}
	got, err := readN(conn, 1, silence)
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("a cut connection answered %q, %v; want silence (a read timeout)", got, err)
	}
}

// expectClosed expects conn to be closed by the other end within 2 s.
func expectClosed(t *testing.T, conn net.Conn) {
	t.Helper()
	got, err := readN(conn, 1, 2*time.Second)
	var ne net.Error
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("connection still open: read %q, %v", got, err)
	}
}

// noClose expects that s saw no connection end within d.
func (s *echoServer) noClose(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case <-s.closed:
		t.Fatal("the target's end of a cut connection was closed")
	case <-time.After(d):
	}
}

// sawClose expects that s saw a connection end within 2 s.
func (s *echoServer) sawClose(t *testing.T) {
	t.Helper()
	select {
	case <-s.closed:
	case <-time.After(2 * time.Second):
		t.Fatal("the target's end of the connection stayed open")
	}
}

func TestPausableProxy(t *testing.T) {
	srv := startEcho(t, "")
	p, err := StartPausableProxy(srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)

	old := dial(t, p.Host)
	echo(t, old, "before the cut")

	p.Cut()
	expectSilence(t, old, "during the cut")
	during := dial(t, p.Host) // accepted, but carries nothing
	expectSilence(t, during, "new during the cut")
	srv.noClose(t, 50*time.Millisecond)

	p.Restore()
	expectClosed(t, old)
	expectClosed(t, during)
	srv.sawClose(t) // the target's end of old
	fresh := dial(t, p.Host)
	echo(t, fresh, "after the restore")

	// a half close passes through: the rest of the echo, then the end
	if _, err := io.WriteString(fresh, "last"); err != nil {
		t.Fatal(err)
	}
	if err := fresh.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got, err := readN(fresh, 4, 2*time.Second); err != nil || got != "last" {
		t.Fatalf("after a half close: got %q, %v", got, err)
	}
	expectClosed(t, fresh)

	open := dial(t, p.Host)
	echo(t, open, "before close")
	p.Close()
	expectClosed(t, open)
}

func TestPausableProxyCutAndRestoreTwice(t *testing.T) {
	srv := startEcho(t, "")
	p, err := StartPausableProxy(srv.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	conn := dial(t, p.Host)
	echo(t, conn, "x")
	p.Cut()
	p.Cut() // cutting twice changes nothing
	expectSilence(t, conn, "y")
	srv.noClose(t, silence)
	p.Restore()
	p.Restore()
	expectClosed(t, conn)
	echo(t, dial(t, p.Host), "z")
}

// TestConnFrontBalancesConnections checks the per-connection balancing without extenders:
// backends that greet with their name, readiness set by the test.
func TestConnFrontBalancesConnections(t *testing.T) {
	names := []string{"a", "b", "c"}
	targets := make([]string, len(names))
	for i, n := range names {
		targets[i] = startEcho(t, n).addr
	}
	ready := make([]atomic.Bool, len(names))
	for i := range ready {
		ready[i].Store(true)
	}
	f, err := startConnFront(targets, func(i int) bool { return ready[i].Load() })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	// connect returns a new connection through the front and the backend that greeted it.
	connect := func() (net.Conn, string) {
		t.Helper()
		conn := dial(t, f.Host)
		got, err := readN(conn, 1, 2*time.Second)
		if err != nil {
			t.Fatalf("no greeting: %v", err)
		}
		return conn, got
	}
	sequence := func(n int) string {
		t.Helper()
		s := ""
		for range n {
			conn, name := connect()
			s += name
			_ = conn.Close()
		}
		return s
	}

	if got := sequence(6); got != "abcabc" {
		t.Errorf("all ready: connections went to %q, want abcabc", got)
	}
	kept, on := connect() // to a
	if on != "a" {
		t.Fatalf("7th connection went to %q, want a", on)
	}
	ready[0].Store(false)
	ready[1].Store(false)
	if got := sequence(3); got != "ccc" {
		t.Errorf("only c ready: connections went to %q, want ccc", got)
	}
	echo(t, kept, "a connection stays on its backend once that is unready")
	ready[2].Store(false)
	if got := sequence(3); got != "bca" {
		t.Errorf("none ready: connections went to %q, want the next in turn, bca", got)
	}
	if got, want := f.Conns(), []int{4, 3, 6}; !slices.Equal(got, want) {
		t.Errorf("Conns() = %v, want %v", got, want)
	}

	// a half close passes through to the backend and its end comes back
	ready[0].Store(true)
	conn, _ := connect()
	if _, err := io.WriteString(conn, "end"); err != nil {
		t.Fatal(err)
	}
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got, err := readN(conn, 3, 2*time.Second); err != nil || got != "end" {
		t.Fatalf("after a half close: got %q, %v", got, err)
	}
	expectClosed(t, conn)

	f.Close()
	expectClosed(t, kept)
	if c, err := net.DialTimeout("tcp", f.Host, time.Second); err == nil {
		_ = c.Close()
		t.Error("the front still accepts after Close")
	}
}

// TestConnFrontUnreachableBackend checks that a connection the front cannot forward is closed
// and not counted.
func TestConnFrontUnreachableBackend(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	_ = ln.Close()
	f, err := startConnFront([]string{gone}, func(int) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	expectClosed(t, dial(t, f.Host))
	if got := f.Conns(); !slices.Equal(got, []int{0}) {
		t.Errorf("Conns() = %v, want [0]", got)
	}
}

func TestKubeconfigVia(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	const orig = `apiVersion: v1
kind: Config
clusters:
- name: gpushare-e2e
  cluster:
    server: https://127.0.0.1:6443
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: secret
contexts:
- name: gpushare-e2e
  context: {cluster: gpushare-e2e, user: admin}
current-context: gpushare-e2e
`
	if err := os.WriteFile(kc, []byte(orig), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Kubeconfig: kc}
	path, err := c.KubeconfigVia("127.0.0.1:7000")
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(path) != dir {
		t.Errorf("written to %s, want next to %s", path, kc)
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cl := cfg.Clusters["gpushare-e2e"]
	if cl == nil || cl.Server != "https://127.0.0.1:7000" || !cl.InsecureSkipTLSVerify {
		t.Errorf("cluster = %+v, want server https://127.0.0.1:7000 with the original TLS settings", cl)
	}
	if u := cfg.AuthInfos["admin"]; u == nil || u.Token != "secret" || cfg.CurrentContext != "gpushare-e2e" {
		t.Errorf("user or context lost: %+v, %q", u, cfg.CurrentContext)
	}
	if raw, err := os.ReadFile(kc); err != nil || string(raw) != orig {
		t.Errorf("the original kubeconfig changed: %v", err)
	}
}
