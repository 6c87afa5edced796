package server

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/klog/v2/ktesting"
)

// errStale is the refusal of the stub leader's "stale" answer.
var errStale = errors.New("stale")

// refusedStale refuses the answer "stale".
func refusedStale(answer []byte) error {
	if string(answer) == "stale" {
		return errStale
	}
	return nil
}

// TestForwarderVerb: a follower answers itself while it leads or when the call was forwarded
// to it; otherwise it forwards to the leader and copies its answer, and answers itself (a
// verb any replica may answer) when the leader fails, refuses or is unknown, after waiting up
// to BindWait for a leader when only the leader may answer. Every outcome is counted.
func TestForwarderVerb(t *testing.T) {
	anyReplica, leaderOnly := Forwarding{Mode: LeaderFirst}, Forwarding{Mode: LeaderOnly, Refused: refusedStale}
	tests := []struct {
		name      string
		how       Forwarding
		leading   bool
		header    string // ForwardedByHeader of the call
		noLeader  bool   // no leader address known
		answer    int    // the leader's status
		stale     bool   // the leader answers 200 "stale", which leaderOnly refuses
		want      string // the answer's body
		wantCount map[string]float64
		// retries: ForwardFailed is not in wantCount and must be 2 or more (one attempt every
		// forwardRetry within BindWait).
		retries bool
	}{
		{name: "leading", how: anyReplica, leading: true, answer: http.StatusOK, want: "local", wantCount: map[string]float64{}},
		{name: "forwarded to it", how: anyReplica, header: "other", answer: http.StatusOK, want: "local", wantCount: map[string]float64{}},
		{name: "not forwarded", how: Forwarding{}, answer: http.StatusOK, want: "local", wantCount: map[string]float64{}},
		{name: "forwarded", how: anyReplica, answer: http.StatusOK, want: "leader", wantCount: map[string]float64{ForwardOK: 1}},
		{name: "leader's 4xx is its answer", how: anyReplica, answer: http.StatusBadRequest, want: "leader", wantCount: map[string]float64{ForwardOK: 1}},
		{name: "leader fails", how: anyReplica, answer: http.StatusServiceUnavailable, want: "local", wantCount: map[string]float64{ForwardFailed: 1, ForwardLocal: 1}},
		{name: "no leader", how: anyReplica, noLeader: true, want: "local", wantCount: map[string]float64{ForwardLocal: 1}},
		{name: "leader only, no leader within the wait", how: leaderOnly, noLeader: true, want: "local", wantCount: map[string]float64{ForwardLocal: 1}},
		{name: "leader only, leader refuses", how: leaderOnly, stale: true, want: "local", wantCount: map[string]float64{ForwardLocal: 1}, retries: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			var forwardedBy atomic.Pointer[string]
			leader := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				by := r.Header.Get(ForwardedByHeader)
				forwardedBy.Store(&by)
				if tc.stale {
					WriteBody(w, http.StatusOK, []byte("stale"), nil)
					return
				}
				WriteBody(w, tc.answer, []byte("leader"), nil)
			}))
			defer leader.Close()
			addr := strings.TrimPrefix(leader.URL, "https://")
			if tc.noLeader {
				addr = ""
			}
			outcomes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "forwards"}, []string{"verb", "outcome"})
			cfg := ForwardConfig{Leader: func() string { return addr }, Transport: leader.Client().Transport, Self: "follower",
				BindWait: 250 * time.Millisecond}
			f := NewForwarder(cfg, func() bool { return tc.leading }, 1<<10, outcomes, logger)
			local := func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
				if body, _ := io.ReadAll(r.Body); string(body) != "call" {
					t.Errorf("answered locally with the body %q, want the call's", body)
				}
				WriteBody(w, http.StatusOK, []byte("local"), nil)
			}
			r := httprouter.New()
			r.POST("/verb", f.Verb("verb", tc.how, local))
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/verb", strings.NewReader("call"))
			if tc.header != "" {
				req.Header.Set(ForwardedByHeader, tc.header)
			}
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, req)
			if got := rec.Body.String(); got != tc.want {
				t.Errorf("answer %q, want %q", got, tc.want)
			}
			if by := forwardedBy.Load(); by != nil && *by != "follower" {
				t.Errorf("the leader saw %s %q, want follower", ForwardedByHeader, *by)
			}
			got := map[string]float64{}
			for _, o := range []string{ForwardOK, ForwardFailed, ForwardLocal} {
				if v := testutil.ToFloat64(outcomes.WithLabelValues("verb", o)); v != 0 {
					got[o] = v
				}
			}
			if tc.retries {
				if got[ForwardFailed] < 2 {
					t.Errorf("%v failed attempts, want a retry every %v within the bind wait", got[ForwardFailed], forwardRetry)
				}
				delete(got, ForwardFailed)
			}
			if diff := cmp.Diff(tc.wantCount, got); diff != "" {
				t.Errorf("outcomes (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestNewForwarderNeedsLeaderAndTransport: without a leader or a transport nothing is
// forwarded.
func TestNewForwarderNeedsLeaderAndTransport(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	outcomes := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "forwards"}, []string{"verb", "outcome"})
	leading := func() bool { return false }
	for _, tc := range []struct {
		name string
		cfg  ForwardConfig
	}{
		{name: "no leader", cfg: ForwardConfig{Transport: http.DefaultTransport}},
		{name: "no transport", cfg: ForwardConfig{Leader: func() string { return "x:1" }}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if f := NewForwarder(tc.cfg, leading, 1, outcomes, logger); f != nil {
				t.Errorf("NewForwarder() = %+v, want nil", f)
			}
		})
	}
}
