package scheduler

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
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/scheduler/wire"
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

// forwardedVerb forwards handle's requests to the leader while this replica follows.
func (h *Handler) forwardedVerb(verb string, handle httprouter.Handle) httprouter.Handle {
	f := h.cfg.Forward
	if f == nil || f.Leader == nil || f.Transport == nil || h.ext.leadership == nil {
		return handle
	}
	ok := h.ext.metrics.forwards.WithLabelValues(verb, forwardOK)
	failed := h.ext.metrics.forwards.WithLabelValues(verb, forwardFailed)
	local := h.ext.metrics.forwards.WithLabelValues(verb, forwardLocal)
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if h.ext.Leading() || r.Header.Get(ForwardedByHeader) != "" {
			handle(w, r, ps)
			return
		}
		body, err := readBody(w, r, h.cfg.MaxBody, nil)
		if err != nil {
			h.bodyError(w, r, err)
			return
		}
		ctx := r.Context()
		var until time.Time
		if verb == "bind" {
			until = time.Now().Add(h.forwardBindWait())
		}
		for !h.ext.Leading() {
			if addr := f.Leader(); addr != "" {
				if connShed(ctx, time.Now(), h.forwardShedAfter()) {
					w.Header().Set("Connection", "close")
				}
				err := h.forward(ctx, w, r, addr, body, verb != "bind")
				if err == nil {
					ok.Inc()
					return
				}
				w.Header().Del("Connection")
				failed.Inc()
				h.logger.V(2).Info("Forwarding to the leader failed", "verb", verb, "leader", addr, "err", err)
			}
			if verb != "bind" || ctx.Err() != nil || !time.Now().Before(until) {
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(forwardRetry):
			}
		}
		if ctx.Err() != nil { // the caller gave up (kube-scheduler's httpTimeout): nobody reads an answer
			writeError(w, http.StatusServiceUnavailable, fmt.Errorf("%s: no leader reached before the call ended: %w", r.URL.Path, context.Cause(ctx)))
			return
		}
		local.Inc()
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		handle(w, r, ps)
	}
}

func (h *Handler) forwardBindWait() time.Duration {
	if d := h.cfg.Forward.BindWait; d > 0 {
		return d
	}
	return DefaultBindWait
}

func (h *Handler) forwardShedAfter() time.Duration {
	if d := h.cfg.Forward.ShedAfter; d > 0 {
		return d
	}
	return DefaultShedAfter
}

// Outcomes of gpushare_forwarded_requests_total.
const (
	forwardOK     = "forwarded"
	forwardFailed = "failed"
	forwardLocal  = "answered_locally"
)

// errLeaderChanged ends a forwarded call whose leader is no longer the one it was sent to.
var errLeaderChanged = errors.New("the leader changed while the call was forwarded")

// forward sends the request, with body, to the leader at addr and copies its answer to w. It
// returns an error, having written nothing, when the call failed, when the leader answered
// 5xx (it is not ready, or busy), or when the leader changed while waiting; bounded calls
// also give up after ForwardConfig.Timeout.
func (h *Handler) forward(ctx context.Context, w http.ResponseWriter, r *http.Request, addr string, body []byte, bounded bool) error {
	f := h.cfg.Forward
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if bounded {
		timeout := f.Timeout
		if timeout <= 0 {
			timeout = DefaultForwardTimeout
		}
		var stop context.CancelFunc
		ctx, stop = context.WithTimeout(ctx, timeout)
		defer stop()
	} else {
		go h.watchLeader(ctx, cancel, addr)
	}
	// addr is the Lease holder's advertised address: only the extender's service account
	// writes that Lease (config/admission/extender-leases.yaml), and the peer must present a
	// certificate of the replicas' CA and name (PeerTransport).
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+r.URL.Path, bytes.NewReader(body)) //nolint:gosec // G704: see above
	if err != nil {
		return fmt.Errorf("forward to %s: %w", addr, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ForwardedByHeader, f.Self)
	resp, err := f.Transport.RoundTrip(req)
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
	case resp.StatusCode == http.StatusOK && notLeaderAnswer(answer):
		// The replica lost the Lease between our look and its fence: find the new leader.
		return fmt.Errorf("forward to %s: %w", addr, ErrNotLeader)
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
func (h *Handler) watchLeader(ctx context.Context, cancel context.CancelCauseFunc, addr string) {
	t := time.NewTicker(forwardRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if h.cfg.Forward.Leader() != addr {
				cancel(errLeaderChanged)
				return
			}
		}
	}
}

// maxForwardAnswer bounds a leader's answer: a filter answer for MaxNodeNames nodes, each
// with a reason, is a few MiB.
const maxForwardAnswer = 64 << 20

// notLeaderAnswer reports whether a bind answer is a refusal for not leading.
func notLeaderAnswer(answer []byte) bool {
	if !bytes.Contains(answer, []byte(ErrNotLeader.Error())) {
		return false
	}
	var res extenderv1.ExtenderBindingResult
	return wire.Decode(answer, &res) == nil && strings.Contains(res.Error, ErrNotLeader.Error())
}
