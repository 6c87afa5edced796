package scheduler

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/julienschmidt/httprouter"
)

// The in-flight budget (HandlerConfig.MaxInflightBytes) counts the body bytes actually read
// and held, not the bytes a request announces: four clients that announced 16 MiB bodies and
// sent a byte every 5 s reserved the whole budget and every other filter got 503 for 30 s.
// Now such a client holds the few bytes it sent, a request is refused (503) only when the
// bytes it reads would take the held bytes past the budget, and a body must arrive within
// HandlerConfig.BodyTimeout (a read deadline on the connection), so that even a client that
// sends most of a large body and then stalls holds its bytes only that long.

// DefaultBodyTimeout is how long a request body may take to arrive: kube-scheduler sends its
// bodies at once, and 16 MiB take well under a second on any network it runs on.
const DefaultBodyTimeout = 10 * time.Second

// ErrBodyTimeout answers a request whose body did not arrive within the body timeout.
var ErrBodyTimeout = errors.New("the request body did not arrive in time")

// bounded refuses a body announced over MaxBody (413), sets the body's read deadline and counts
// the bytes read against the in-flight budget while the request is served (budgetBody).
func (h *Handler) bounded(handle httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if n := r.ContentLength; n > h.cfg.MaxBody {
			writeError(w, http.StatusRequestEntityTooLarge, fmt.Errorf("%s: a body of %d bytes is larger than the %d the extender accepts (--max-body-bytes)", r.URL.Path, n, h.cfg.MaxBody))
			return
		}
		// Not every writer supports a read deadline (httptest's recorder); the server's
		// ReadTimeout still bounds those.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(h.cfg.BodyTimeout))
		body := &budgetBody{ReadCloser: r.Body, h: h, rc: rc}
		defer body.release()
		r.Body = body
		handle(w, r, ps)
	}
}

// budgetBody is a request body whose bytes, as they are read, are charged to the handler's
// in-flight budget until release.
type budgetBody struct {
	io.ReadCloser
	h    *Handler
	rc   *http.ResponseController
	held int64
}

// Read reads into p and charges what it read; ErrBusy when that takes the bytes held by all
// requests past MaxInflightBytes.
func (b *budgetBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		if b.h.inflight.Add(int64(n)) > b.h.cfg.MaxInflightBytes {
			b.h.inflight.Add(-int64(n))
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
		err = fmt.Errorf("%w (%v): %w", ErrBodyTimeout, b.h.cfg.BodyTimeout, err)
	}
	return n, err
}

// release gives the bytes read back to the budget (the request has been served).
func (b *budgetBody) release() { b.h.inflight.Add(-b.held) }

// isTimeout reports whether err is a network timeout (a read deadline passed).
func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return err != nil && errors.As(err, &t) && t.Timeout()
}
