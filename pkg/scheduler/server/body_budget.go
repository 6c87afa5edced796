package server

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"
)

// The in-flight budget (BodyBudget) counts the body bytes actually read and held, not the bytes
// a request announces: four clients that announced 16 MiB bodies and sent a byte every 5 s
// reserved the whole budget and every other filter got 503 for 30 s. Now such a client holds
// the few bytes it sent, a request is refused (503) only when the bytes it reads would take the
// held bytes past the budget, and a body must arrive within the body timeout (a read deadline
// on the connection), so that even a client that sends most of a large body and then stalls
// holds its bytes only that long.

// DefaultBodyTimeout is how long a request body may take to arrive: kube-scheduler sends its
// bodies at once, and 16 MiB take well under a second on any network it runs on.
const DefaultBodyTimeout = 10 * time.Second

// inflightBodies is how many largest bodies may be read at once when the budget is not given.
const inflightBodies = 4

// ErrBodyTimeout answers a request whose body did not arrive within the body timeout.
var ErrBodyTimeout = errors.New("the request body did not arrive in time")

// ErrBusy answers a request whose body would take the body bytes held by the requests being
// served past the in-flight budget.
var ErrBusy = errors.New("the extender is serving too many large requests; retry shortly")

// BodyBudget bounds the request bodies of the routes it guards (Bound): each body's size, the
// bytes all of them hold at once, and how long one may take to arrive. Safe for concurrent use.
type BodyBudget struct {
	maxBody, maxInflight int64
	timeout              time.Duration
	// inflight is the body bytes read and held by the requests being served (at most
	// maxInflight).
	inflight atomic.Int64
}

// NewBodyBudget bounds a body to maxBody bytes (413 beyond), the bytes read and held by the
// requests being served at once to maxInflight (503 beyond; zero: 4 x maxBody), and the time a
// body may take to arrive to timeout (408 beyond; zero: DefaultBodyTimeout).
func NewBodyBudget(maxBody, maxInflight int64, timeout time.Duration) *BodyBudget {
	if maxInflight <= 0 {
		maxInflight = inflightBodies * maxBody
	}
	if timeout <= 0 {
		timeout = DefaultBodyTimeout
	}
	return &BodyBudget{maxBody: maxBody, maxInflight: maxInflight, timeout: timeout}
}

// Bound refuses a body announced over the largest accepted (413), sets the body's read
// deadline and counts the bytes read against the in-flight budget while the request is served
// (budgetBody).
func (b *BodyBudget) Bound(handle httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if n := r.ContentLength; n > b.maxBody {
			WriteError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("%s: a body of %d bytes is larger than the %d the extender accepts (--max-body-bytes)", r.URL.Path, n, b.maxBody))
			return
		}
		// Not every writer supports a read deadline (httptest's recorder); the server's
		// ReadTimeout still bounds those.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(b.timeout))
		body := &budgetBody{ReadCloser: r.Body, budget: b, rc: rc}
		defer body.release()
		r.Body = body
		handle(w, r, ps)
	}
}

// budgetBody is a request body whose bytes, as they are read, are charged to its budget until
// release.
type budgetBody struct {
	io.ReadCloser
	budget *BodyBudget
	rc     *http.ResponseController
	held   int64
}

// Read reads into p and charges what it read; ErrBusy when that takes the bytes held by all
// requests past the in-flight budget.
func (b *budgetBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		if b.budget.inflight.Add(int64(n)) > b.budget.maxInflight {
			b.budget.inflight.Add(-int64(n))
			return 0, ErrBusy
		}
		b.held += int64(n)
	}
	switch {
	case errors.Is(err, io.EOF):
		// The body is in: lift the deadline, which would otherwise cancel the request's
		// context in the middle of a long bind (net/http's background read fails with it).
		_ = b.rc.SetReadDeadline(time.Time{})
	case isTimeout(err):
		err = fmt.Errorf("%w (%v): %w", ErrBodyTimeout, b.budget.timeout, err)
	}
	return n, err
}

// release gives the bytes read back to the budget (the request has been served).
func (b *budgetBody) release() { b.budget.inflight.Add(-b.held) }

// isTimeout reports whether err is a network timeout (a read deadline passed).
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return err != nil && errors.As(err, &t) && t.Timeout()
}

// preallocBody is the largest announced body ReadBody allocates before reading it: an
// announcement costs the client nothing, so larger bodies grow their buffer as they arrive.
const preallocBody = 1 << 20

// ReadBody reads r's whole body, at most limit bytes (an *http.MaxBytesError beyond), into
// into's storage when it is large enough.
func ReadBody(w http.ResponseWriter, r *http.Request, limit int64, into []byte) ([]byte, error) {
	buf := bytes.NewBuffer(into[:0])
	if n := r.ContentLength; n > 0 && n <= min(limit, preallocBody) {
		buf.Grow(int(n) + bytes.MinRead) // one allocation when the length is announced
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	return buf.Bytes(), err
}

// BodyError answers a request whose body could not be read (ReadBody) or decoded: 413 over
// the largest body accepted, 503 over the in-flight budget, 408 when it did not arrive in time,
// 400 otherwise.
func BodyError(w http.ResponseWriter, r *http.Request, err error) {
	status := http.StatusBadRequest
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		status = http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrBusy):
		status = http.StatusServiceUnavailable
	case errors.Is(err, ErrBodyTimeout):
		status = http.StatusRequestTimeout
	}
	what := "malformed " + r.URL.Path + " request"
	if status != http.StatusBadRequest {
		what = r.URL.Path
	}
	WriteError(w, status, fmt.Errorf("%s: %w", what, err))
}
