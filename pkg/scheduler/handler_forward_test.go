package scheduler

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"

	"github.com/gpushare/gpushare/pkg/scheduler/fence"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

// stubLeadership leads while leading is set.
type stubLeadership struct{ leading atomic.Bool }

func (s *stubLeadership) Leading() bool { return s.leading.Load() }
func (s *stubLeadership) Leader() string {
	if s.leading.Load() {
		return "self"
	}
	return "other"
}

// replica is one extender replica behind an HTTPS test server.
type replica struct {
	srv  *httptest.Server
	api  *fake.Clientset
	ext  *Extender
	lead *stubLeadership
	// leader is where it forwards to ("" none).
	leader atomic.Pointer[string]
	// conns counts the connections its server accepted.
	conns atomic.Int32
}

func (r *replica) addr() string { return r.srv.Listener.Addr().String() }

func (r *replica) forwardTo(addr string) { r.leader.Store(&addr) }

// forwardPair starts a leader and a follower over the route fixture. The follower's cache
// lacks node n1 (its informer is behind): whatever it answers about n1 comes from the leader.
func forwardPair(t *testing.T, fcfg server.ForwardConfig) (leader, follower *replica) {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	start := func(nodes []*v1.Node, pods []*v1.Pod, leading bool, fcfg *server.ForwardConfig) *replica {
		r := &replica{lead: &stubLeadership{}}
		r.lead.leading.Store(leading)
		r.forwardTo("")
		ext, api := extenderOn(logger, nodes, pods, WithLeadership(r.lead))
		r.ext, r.api = ext, api
		hcfg := HandlerConfig{MaxBody: testBodyLimit}
		if fcfg != nil {
			cfg := *fcfg
			cfg.Leader = func() string { return *r.leader.Load() }
			hcfg.Forward = &cfg
		}
		r.srv = httptest.NewUnstartedServer(NewHandler(ext, func() bool { return true }, hcfg, logger))
		r.srv.Config.ConnContext = server.ConnContext
		r.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				r.conns.Add(1)
			}
		}
		r.srv.EnableHTTP2 = true
		r.srv.StartTLS()
		t.Cleanup(r.srv.Close)
		return r
	}
	nodes, pods := routeFixture()
	leader = start(nodes, pods, true, nil)
	fcfg.Transport = leader.srv.Client().Transport
	fcfg.Self = "follower"
	follower = start(nodes[1:], pods, false, &fcfg)
	follower.forwardTo(leader.addr())
	return leader, follower
}

const bindP = `{"podName":"p","podNamespace":"default","node":"n1"}`

func forwardCount(t *testing.T, r *replica, verb, outcome string) float64 {
	t.Helper()
	return scrape(t, r.srv)[`gpushare_forwarded_requests_total{outcome="`+outcome+`",verb="`+verb+`"}`]
}

func bindResult(t *testing.T, body []byte) string {
	t.Helper()
	res, ok := decodeAs(t, &extenderv1.ExtenderBindingResult{}, body).(*extenderv1.ExtenderBindingResult)
	if !ok {
		t.Fatalf("bind answer %s", body)
	}
	return res.Error
}

func nodeOf(t *testing.T, r *replica, pod string) string {
	t.Helper()
	p, err := r.api.CoreV1().Pods("default").Get(t.Context(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Spec.NodeName
}

// TestFollowerForwardsToLeader: a follower's filter is the leader's answer, and its bind is
// the leader's bind (the leader's API has the Binding, the follower wrote nothing).
func TestFollowerForwardsToLeader(t *testing.T) {
	leader, follower := forwardPair(t, server.ForwardConfig{})
	status, _, body := do(t, follower.srv, http.MethodPost, Prefix+"/filter", mustJSON(t, extenderv1.ExtenderArgs{
		Pod: st.MakePod().Name("p").GPUMem(4).Obj(), NodeNames: names("n1", "n2")}))
	if status != http.StatusOK || !strings.Contains(string(body), `"NodeNames":["n1"]`) {
		t.Errorf("filter through the follower = %d %s, want the leader's answer (n1 fits)", status, body)
	}
	status, _, body = do(t, follower.srv, http.MethodPost, Prefix+"/bind", bindP)
	if status != http.StatusOK || bindResult(t, body) != "" {
		t.Fatalf("bind through the follower = %d %s", status, body)
	}
	if got := nodeOf(t, leader, "p"); got != "n1" {
		t.Errorf("leader's API has p on %q, want n1", got)
	}
	if got := nodeOf(t, follower, "p"); got != "" {
		t.Errorf("the follower bound p itself (to %q)", got)
	}
	if got := forwardCount(t, follower, "bind", server.ForwardOK); got != 1 {
		t.Errorf("forwarded binds = %g, want 1", got)
	}
	if got := forwardCount(t, follower, "filter", server.ForwardOK); got != 1 {
		t.Errorf("forwarded filters = %g, want 1", got)
	}
}

// TestFollowerWithoutLeader: with no leader to reach, filter is answered from the follower's
// own cache at once, and a bind waits BindWait for a leader, then is refused as not the leader
// without touching the follower's API.
func TestFollowerWithoutLeader(t *testing.T) {
	_, follower := forwardPair(t, server.ForwardConfig{BindWait: 300 * time.Millisecond})
	follower.forwardTo("")
	status, _, body := do(t, follower.srv, http.MethodPost, Prefix+"/filter", mustJSON(t, extenderv1.ExtenderArgs{
		Pod: st.MakePod().Name("p").GPUMem(4).Obj(), NodeNames: names("n1", "n4")}))
	if status != http.StatusOK || !strings.Contains(string(body), `"NodeNames":["n4"]`) {
		t.Errorf("filter on a follower without a leader = %d %s, want its own answer (n1 unknown, n4 fits)", status, body)
	}
	start := time.Now()
	_, _, body = do(t, follower.srv, http.MethodPost, Prefix+"/bind", bindP)
	waited := time.Since(start)
	if msg := bindResult(t, body); !strings.Contains(msg, fence.ErrNotLeader.Error()) {
		t.Errorf("bind with no leader = %q, want a refusal as not the leader", msg)
	}
	if waited < 300*time.Millisecond {
		t.Errorf("bind refused after %v, want it to wait BindWait (300ms) for a leader", waited)
	}
	if got := nodeOf(t, follower, "p"); got != "" {
		t.Errorf("the follower bound p to %q", got)
	}
	if got := forwardCount(t, follower, "filter", server.ForwardLocal); got != 1 {
		t.Errorf("filters answered locally = %g, want 1", got)
	}
}

// TestBindWaitsForLeader: a bind sent while no leader is known is forwarded as soon as one is;
// one sent while this replica takes the Lease is bound here.
func TestBindWaitsForLeader(t *testing.T) {
	for _, becomesLeader := range []bool{false, true} {
		name := map[bool]string{false: "leader appears", true: "follower takes over"}[becomesLeader]
		t.Run(name, func(t *testing.T) {
			leader, follower := forwardPair(t, server.ForwardConfig{BindWait: 10 * time.Second})
			follower.forwardTo("")
			go func() {
				time.Sleep(200 * time.Millisecond)
				if becomesLeader {
					follower.lead.leading.Store(true)
				} else {
					follower.forwardTo(leader.addr())
				}
			}()
			_, _, body := do(t, follower.srv, http.MethodPost, Prefix+"/bind", `{"podName":"p","podNamespace":"default","node":"n4"}`)
			if msg := bindResult(t, body); msg != "" {
				t.Fatalf("bind = %q, want it bound once a leader is there", msg)
			}
			binder, other := leader, follower
			if becomesLeader {
				binder, other = follower, leader
			}
			if got := nodeOf(t, binder, "p"); got != "n4" {
				t.Errorf("p is on %q in the binder's API, want n4", got)
			}
			if got := nodeOf(t, other, "p"); got != "" {
				t.Errorf("p is also bound in the other replica's API (%q)", got)
			}
		})
	}
}

// TestForwardedIsNotForwardedAgain: a replica does not forward what another forwarded to it
// (no loops when two replicas each think the other leads): a forwarded bind to a follower is
// refused as not the leader, and the forwarding follower then looks for the leader again.
func TestForwardedIsNotForwardedAgain(t *testing.T) {
	a, b := forwardPair(t, server.ForwardConfig{BindWait: 400 * time.Millisecond})
	a.lead.leading.Store(false) // neither leads; b forwards to a
	_, _, body := do(t, b.srv, http.MethodPost, Prefix+"/bind", bindP)
	if msg := bindResult(t, body); !strings.Contains(msg, fence.ErrNotLeader.Error()) {
		t.Errorf("bind = %q, want a refusal as not the leader", msg)
	}
	if got := forwardCount(t, b, "bind", server.ForwardFailed); got < 2 {
		t.Errorf("failed forwarding attempts = %g, want the refused one retried until BindWait", got)
	}
	if nodeOf(t, a, "p") != "" || nodeOf(t, b, "p") != "" {
		t.Error("a replica that does not lead bound p")
	}
}

// TestForwardGivesUpOnChangedLeader: a forwarded call to a leader that hangs (paused) is
// abandoned as soon as the Lease names another leader, and the bind goes to the new one.
func TestForwardGivesUpOnChangedLeader(t *testing.T) {
	leader, follower := forwardPair(t, server.ForwardConfig{BindWait: 20 * time.Second})
	hung := make(chan struct{})
	paused := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hung:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hung); paused.Close() })
	// Every httptest TLS server serves the same certificate: the follower's transport trusts it.
	follower.forwardTo(paused.Listener.Addr().String())
	go func() {
		time.Sleep(300 * time.Millisecond)
		follower.forwardTo(leader.addr())
	}()
	start := time.Now()
	_, _, body := do(t, follower.srv, http.MethodPost, Prefix+"/bind", bindP)
	if msg := bindResult(t, body); msg != "" {
		t.Fatalf("bind = %q", msg)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("bind took %v: the call to the hung leader was not given up when the leader changed", took)
	}
	if got := nodeOf(t, leader, "p"); got != "n1" {
		t.Errorf("p on %q in the new leader's API, want n1", got)
	}
}

// TestFollowerShedsConnection: a follower answers every call it forwards, and once it has
// forwarded a connection's calls for ShedAfter its answer closes that connection (HTTP/1.1
// Connection: close, HTTP/2 GOAWAY), so that a caller behind a Service reconnects and can land
// on the leader; the leader never closes a connection.
func TestFollowerShedsConnection(t *testing.T) {
	const shed = 200 * time.Millisecond
	filter := mustJSON(t, extenderv1.ExtenderArgs{Pod: st.MakePod().Name("p").GPUMem(4).Obj(), NodeNames: names("n1", "n2")})
	for _, proto := range []string{"http/1.1", "h2"} {
		t.Run(proto, func(t *testing.T) {
			leader, follower := forwardPair(t, server.ForwardConfig{ShedAfter: shed})
			client := func() *http.Client {
				tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{proto}}, ForceAttemptHTTP2: proto == "h2"} //nolint:gosec // G402: a test server
				t.Cleanup(tr.CloseIdleConnections)
				return &http.Client{Transport: tr}
			}
			post := func(c *http.Client, srv *httptest.Server) (closes bool) {
				t.Helper()
				req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+Prefix+"/filter", strings.NewReader(filter))
				if err != nil {
					t.Fatal(err)
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatalf("filter: %v", err)
				}
				defer func() { _ = resp.Body.Close() }()
				body, err := io.ReadAll(resp.Body)
				if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"NodeNames":["n1"]`) {
					t.Fatalf("filter = %d %s %v, want the leader's answer (n1)", resp.StatusCode, body, err)
				}
				if want := map[string]string{"h2": "HTTP/2.0", "http/1.1": "HTTP/1.1"}[proto]; resp.Proto != want {
					t.Fatalf("spoke %s, want %s", resp.Proto, proto)
				}
				return resp.Close
			}
			fc, lc := client(), client()
			if post(fc, follower.srv) {
				t.Errorf("the follower closed the connection on its first forwarded call")
			}
			time.Sleep(shed)
			closes := post(fc, follower.srv)
			if proto == "http/1.1" && !closes {
				t.Errorf("after %v of forwarding the follower's answer did not close the connection", shed)
			}
			post(fc, follower.srv)
			if got := follower.conns.Load(); got != 2 {
				t.Errorf("the follower accepted %d connections for 3 calls %v apart, want 2 (shed once)", got, shed)
			}
			for range 3 {
				if post(lc, leader.srv) {
					t.Errorf("the leader closed a connection")
				}
				time.Sleep(shed)
			}
			if got := leader.conns.Load(); got != 2 {
				t.Errorf("the leader accepted %d connections (the follower's and the client's), want 2", got)
			}
			if got := forwardCount(t, follower, "filter", server.ForwardOK); got != 3 {
				t.Errorf("forwarded filters = %g, want 3", got)
			}
		})
	}
}
