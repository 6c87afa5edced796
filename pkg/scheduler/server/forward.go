package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// A follower forwards the verbs it is sent to the leader, so that which replica a front picks
// makes no difference to kube-scheduler: every filter, prioritize and preempt is answered from
// the leader's cache, which holds the pods it has assumed and not yet seen come back from the
// API server, and every bind is made by the leader. Refusing binds on followers (the earlier
// design) sent every other bind of a burst back to kube-scheduler's backoff behind a
// per-request front, and all of them behind a Service when kube-scheduler's one connection
// landed on a follower; making only the leader ready would stall a Deployment's rolling update
// (the new pod, a follower, never becomes ready) and leaves kube-scheduler's open connection on
// the old leader after a leadership change.
//
// A follower also sheds the connection of a caller it forwards for (connShed): once it has
// forwarded on a connection for ForwardConfig.ShedAfter, its next forwarded answer closes the connection
// (Connection: close; over HTTP/2 a GOAWAY, which lets the calls in flight finish and makes the
// client retry any it had not yet sent). kube-scheduler keeps one connection to the extender,
// and a Service balances connections: the new one lands on the leader or on another follower
// that sheds it in turn, so kube-scheduler settles on the leader within a second or two, also
// after a leadership change, and pays the forwarding hop (an in-line filter waits for it) only
// meanwhile. A front that balances requests reopens its connection to a follower at most once
// per ShedAfter.
//
// When no leader can be reached (none is known, its Lease has not been seen renewed for the
// renew deadline, or the call fails), a follower answers filter, prioritize and preempt from
// its own cache: it may miss the leader's assumed pods and call a card free that the leader
// has just charged, but the leader's bind checks the card again, so the cost is a refused
// bind that kube-scheduler retries, never an over-committed card. A bind waits for a leader
// instead (up to ForwardConfig.BindWait), forwarding as soon as one is reachable and binding
// itself if this replica takes the Lease: a failover costs kube-scheduler a slower bind, not
// a refused one.

// ForwardedByHeader names the replica that forwarded a request. A replica never forwards a
// request that carries it: a follower that forwarded to a replica which just lost the Lease
// gets that replica's own answer (a refusal for a bind), not a loop.
const ForwardedByHeader = "Gpushare-Forwarded-By"

// ForwardConfig lets a follower forward the verbs to the leader.
type ForwardConfig struct {
	// Leader is where the leader listens (host:port): "" while this replica leads or no leader
	// is known and current (Elector.LeaderAddress).
	Leader func() string
	// Transport reaches the leader over HTTPS, presenting a client certificate the leader
	// accepts (PeerTransport).
	Transport http.RoundTripper
	// Self names this replica in ForwardedByHeader.
	Self string
	// Timeout bounds a forwarded filter, prioritize or preempt; past it the follower answers
	// from its own cache. Zero means DefaultForwardTimeout.
	Timeout time.Duration
	// BindWait bounds how long a bind waits for a leader to forward to (or for this replica
	// to lead) before it is refused as not the leader; the call's own deadline
	// (kube-scheduler's httpTimeout) bounds it too. Zero means DefaultBindWait.
	BindWait time.Duration
	// ShedAfter is how long this replica forwards a connection's calls before its answer
	// closes the connection, so that the caller reconnects, through its Service, to the
	// leader. Zero means DefaultShedAfter; it needs the server's ConnContext.
	ShedAfter time.Duration
}

// DefaultForwardTimeout is how long a follower waits for the leader's filter, prioritize or
// preempt answer: the leader answers in milliseconds (12 ms at the 99th percentile over 5,000
// candidate nodes); one that takes seconds is paused or cut off.
const DefaultForwardTimeout = 2 * time.Second

// DefaultBindWait is how long a bind waits for a reachable leader: a dead leader is replaced
// within about 12 s (DefaultElectionConfig), well inside kube-scheduler's 30 s httpTimeout.
const DefaultBindWait = 20 * time.Second

// forwardRetry is how often a waiting bind looks for a leader again.
const forwardRetry = 100 * time.Millisecond

// ForwardMode says whether a follower forwards a verb to the leader, and how.
type ForwardMode int

const (
	// AnswerHere: the verb is never forwarded; every replica answers it itself.
	AnswerHere ForwardMode = iota
	// LeaderFirst: the leader is tried once, for at most ForwardConfig.Timeout, and when it
	// cannot answer the call is answered from this replica's own cache (filter, prioritize,
	// preempt: the leader's bind checks the card again).
	LeaderFirst
	// LeaderOnly: only the leader may answer the verb (bind). The call waits up to
	// ForwardConfig.BindWait for a leader to forward to, or for this replica to lead, before it
	// is answered here; a forwarded call is given up on when the leader changes, not after
	// ForwardConfig.Timeout.
	LeaderOnly
)

// Forwarding is how a follower forwards one verb to the leader. The zero value never
// forwards.
type Forwarding struct {
	// Mode says whether and how the verb is forwarded.
	Mode ForwardMode
	// Refused, if set, says why a leader's 200 answer refuses the call because that replica no
	// longer leads (nil when it does not): the follower then looks for the new leader.
	Refused func(answer []byte) error
}

// Outcomes of a forwarded verb (NewForwarder's outcomes counter).
const (
	// ForwardOK: the leader answered.
	ForwardOK = "forwarded"
	// ForwardFailed: one forwarding attempt failed (a bind tries again).
	ForwardFailed = "failed"
	// ForwardLocal: no leader could be reached and this replica answered.
	ForwardLocal = "answered_locally"
)

// Forwarder forwards a follower's verbs to the leader (Verb). Safe for concurrent use.
type Forwarder struct {
	cfg ForwardConfig
	// leading reports whether this replica leads: it then answers every call itself.
	leading func() bool
	maxBody int64
	// outcomes counts the calls by verb and outcome (ForwardOK, ForwardFailed, ForwardLocal).
	outcomes *prometheus.CounterVec
	logger   klog.Logger
}

// NewForwarder forwards, while leading says this replica does not lead, the calls of the verbs
// it wraps to the leader cfg names, reading bodies of up to maxBody bytes, and counts each call
// in outcomes by verb and outcome. It returns nil, which forwards nothing, when cfg names no
// leader or no transport.
func NewForwarder(cfg ForwardConfig, leading func() bool, maxBody int64, outcomes *prometheus.CounterVec, logger klog.Logger) *Forwarder {
	if cfg.Leader == nil || cfg.Transport == nil || leading == nil {
		return nil
	}
	return &Forwarder{cfg: cfg, leading: leading, maxBody: maxBody, outcomes: outcomes, logger: logger}
}

// Verb forwards handle's requests, of verb, to the leader as how says while this replica
// follows; a nil Forwarder forwards nothing.
func (f *Forwarder) Verb(verb string, how Forwarding, handle httprouter.Handle) httprouter.Handle {
	if f == nil || how.Mode == AnswerHere {
		return handle
	}
	c := forwardedVerb{Forwarder: f, verb: verb, how: how, handle: handle,
		ok:     f.outcomes.WithLabelValues(verb, ForwardOK),
		failed: f.outcomes.WithLabelValues(verb, ForwardFailed),
		local:  f.outcomes.WithLabelValues(verb, ForwardLocal)}
	return c.serve
}

// forwardedVerb is one verb as a follower serves it.
type forwardedVerb struct {
	*Forwarder
	verb              string
	how               Forwarding
	handle            httprouter.Handle
	ok, failed, local prometheus.Counter
}

// serve forwards the call to the leader, or answers it here when this replica leads, when it
// was forwarded to this one, or when no leader answers in time.
func (c forwardedVerb) serve(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
	if c.leading() || r.Header.Get(ForwardedByHeader) != "" {
		c.handle(w, r, ps)
		return
	}
	body, err := ReadBody(w, r, c.maxBody, nil)
	if err != nil {
		BodyError(w, r, err)
		return
	}
	if c.toLeader(w, r, body) {
		return
	}
	if ctx := r.Context(); ctx.Err() != nil { // the caller gave up (kube-scheduler's httpTimeout): nobody reads an answer
		WriteError(w, http.StatusServiceUnavailable, fmt.Errorf("%s: no leader reached before the call ended: %w", r.URL.Path, context.Cause(ctx)))
		return
	}
	c.local.Inc()
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	c.handle(w, r, ps)
}

// toLeader forwards the call, with body, to the leader until one answers or how gives up, and
// reports whether the leader's answer was written.
func (c forwardedVerb) toLeader(w http.ResponseWriter, r *http.Request, body []byte) bool {
	ctx := r.Context()
	var until time.Time
	if c.how.Mode == LeaderOnly {
		until = time.Now().Add(c.bindWait())
	}
	for !c.leading() {
		if addr := c.cfg.Leader(); addr != "" {
			if connShed(ctx, time.Now(), c.shedAfter()) {
				w.Header().Set("Connection", "close")
			}
			err := c.forward(ctx, w, r, addr, body, c.how)
			if err == nil {
				c.ok.Inc()
				return true
			}
			w.Header().Del("Connection")
			c.failed.Inc()
			c.logger.V(2).Info("Forwarding to the leader failed", "verb", c.verb, "leader", addr, "err", err)
		}
		if c.how.Mode != LeaderOnly || ctx.Err() != nil || !time.Now().Before(until) {
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(forwardRetry):
		}
	}
	return false
}

func (f *Forwarder) bindWait() time.Duration {
	if d := f.cfg.BindWait; d > 0 {
		return d
	}
	return DefaultBindWait
}

func (f *Forwarder) shedAfter() time.Duration {
	if d := f.cfg.ShedAfter; d > 0 {
		return d
	}
	return DefaultShedAfter
}

// errLeaderChanged ends a forwarded call whose leader is no longer the one it was sent to.
var errLeaderChanged = errors.New("the leader changed while the call was forwarded")

// forward sends the request, with body, to the leader at addr and copies its answer to w. It
// returns an error, having written nothing, when the call failed, when the leader answered
// 5xx (it is not ready, or busy), when how says its answer refuses the call, or when the
// leader changed while a call that waits for a leader waited; other calls give up after
// ForwardConfig.Timeout.
func (f *Forwarder) forward(ctx context.Context, w http.ResponseWriter, r *http.Request, addr string, body []byte, how Forwarding) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if how.Mode != LeaderOnly {
		timeout := f.cfg.Timeout
		if timeout <= 0 {
			timeout = DefaultForwardTimeout
		}
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, timeout)
		defer stop()
	} else {
		go f.watchLeader(ctx, cancel, addr)
	}
	// addr is the Lease holder's advertised address: only the extender's service account
	// writes that Lease (config/admission/extender-leases.yaml), and the peer must present a
	// certificate of the replicas' CA and name (PeerTransport).
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+r.URL.Path, bytes.NewReader(body)) //nolint:gosec // G704: see above
	if err != nil {
		return fmt.Errorf("forward to %s: %w", addr, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ForwardedByHeader, f.cfg.Self)
	resp, err := f.cfg.Transport.RoundTrip(req)
	if err != nil {
		if cause := context.Cause(ctx); cause != nil {
			err = fmt.Errorf("%w (%w)", err, cause)
		}
		return fmt.Errorf("forward to %s: %w", addr, err)
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxForwardAnswer+1))
	switch {
	case err != nil:
		return fmt.Errorf("forward to %s: reading the answer: %w", addr, err)
	case len(answer) > maxForwardAnswer:
		return fmt.Errorf("forward to %s: an answer over %d bytes", addr, maxForwardAnswer)
	case resp.StatusCode >= http.StatusInternalServerError:
		return fmt.Errorf("forward to %s: %s: %s", addr, resp.Status, strings.TrimSpace(string(answer)))
	}
	if how.Refused != nil && resp.StatusCode == http.StatusOK {
		if err := how.Refused(answer); err != nil {
			// The replica lost the Lease between our look and its fence: find the new leader.
			return fmt.Errorf("forward to %s: %w", addr, err)
		}
	}
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(answer)
	return nil
}

// watchLeader cancels a forwarded bind, which has no timeout of its own, as soon as addr is no
// longer the leader: one that stops renewing (paused, cut off) is given up on at once and the
// bind goes to its successor. A bounded call gives up after ForwardConfig.Timeout instead,
// before the Lease could show a stale leader (RenewDeadline), without a watcher per call.
func (f *Forwarder) watchLeader(ctx context.Context, cancel context.CancelCauseFunc, addr string) {
	t := time.NewTicker(forwardRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if f.cfg.Leader() != addr {
				cancel(errLeaderChanged)
				return
			}
		}
	}
}

// maxForwardAnswer bounds a leader's answer: a filter answer for the most candidate nodes the
// extender accepts (25,000), each with a reason, is a few MiB.
const maxForwardAnswer = 64 << 20
