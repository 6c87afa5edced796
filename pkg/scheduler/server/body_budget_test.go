package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/julienschmidt/httprouter"
)

// budgetServer serves POST /verb, bounded by budget: it reads the body (ReadBody) and answers
// 200, or the body's error (BodyError).
func budgetServer(t *testing.T, budget *BodyBudget) *httptest.Server {
	t.Helper()
	r := httprouter.New()
	r.POST("/verb", budget.Bound(func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		if _, err := ReadBody(w, r, budget.maxBody, nil); err != nil {
			BodyError(w, r, err)
			return
		}
		WriteJSON(w, http.StatusOK, "read")
	}))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv
}

// do sends body to path on srv and returns the answer's status and body.
func do(t *testing.T, srv *httptest.Server, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestBodyBudgetCountsBytesRead: the in-flight budget holds the body bytes actually read.
// Clients that announce large bodies and send nothing (the probe's slow bodies) hold nothing,
// and other calls are served; a client that sent most of its body and stalls holds what it
// sent, so a request whose bytes would go past the budget is refused with 503; once the
// stalled one ends, the same request is served and every byte is given back.
func TestBodyBudgetCountsBytesRead(t *testing.T) {
	budget := NewBodyBudget(4096, 5000, 0)
	srv := budgetServer(t, budget)
	body := strings.Repeat(" ", 2100)

	// Four clients announce 4,000 bytes each (16,000 > 5,000) and send nothing yet.
	var wg sync.WaitGroup
	var releases []func()
	for range 4 {
		slow, release := newSlowBody(4000, 0)
		releases = append(releases, release)
		wg.Add(1)
		go func() { defer wg.Done(); post(t, srv, slow, 4000) }()
		<-slow.started
	}
	if status, answer := do(t, srv, "/verb", body); status != http.StatusOK {
		t.Errorf("a request beside four announced, unsent bodies = %d %s, want 200", status, answer)
	}
	for _, release := range releases {
		release()
	}
	wg.Wait()

	// One client sends 3,500 of its 4,000 bytes and stalls: 3,500 + 2,100 > 5,000.
	slow, release := newSlowBody(4000, 3500)
	wg.Add(1)
	go func() { defer wg.Done(); post(t, srv, slow, 4000) }()
	waitUntil(t, "the server to read the first 3,500 bytes", func() bool { return budget.inflight.Load() >= 3500 })
	status, answer := do(t, srv, "/verb", body)
	if status != http.StatusServiceUnavailable || !strings.Contains(answer, ErrBusy.Error()) {
		t.Errorf("request beside 3,500 bytes held = %d %s, want 503 %q", status, answer, ErrBusy)
	}
	release()
	wg.Wait()
	waitUntil(t, "the same request to be served", func() bool {
		status, _ := do(t, srv, "/verb", body)
		return status == http.StatusOK
	})
	waitUntil(t, "every byte given back", func() bool { return budget.inflight.Load() == 0 })
}

// TestBodyBudgetTimeout: a body that stalls is cut at BodyTimeout (408) and its bytes given
// back, instead of holding its share of the budget for the server's 30 s ReadTimeout.
func TestBodyBudgetTimeout(t *testing.T) {
	budget := NewBodyBudget(4096, 0, 200*time.Millisecond)
	srv := budgetServer(t, budget)
	slow, release := newSlowBody(4000, 100)
	defer release()
	start := time.Now()
	status, answer := post(t, srv, slow, 4000)
	if status != http.StatusRequestTimeout || !strings.Contains(answer, ErrBodyTimeout.Error()) {
		t.Errorf("stalled body = %d %s, want 408 %q", status, answer, ErrBodyTimeout)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the stalled body was cut after %v, want about 200ms", took)
	}
	waitUntil(t, "every byte given back", func() bool { return budget.inflight.Load() == 0 })
}

// post sends body, announced at n bytes, to /verb and returns the answer (0 when none came).
func post(t *testing.T, srv *httptest.Server, body io.Reader, n int64) (int, string) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/verb", body)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	req.ContentLength = n
	resp, err := srv.Client().Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// waitUntil polls cond for up to 5 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// slowBody sends its first `first` bytes of spaces at once, and the rest of n after release
// is called.
type slowBody struct {
	n, first int
	started  chan struct{}
	release  chan struct{}
	once     sync.Once
}

func newSlowBody(n, first int) (*slowBody, func()) {
	b := &slowBody{n: n, first: first, started: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	return b, func() { once.Do(func() { close(b.release) }) }
}

func (b *slowBody) Read(p []byte) (int, error) {
	b.once.Do(func() { close(b.started) })
	if b.first == 0 {
		<-b.release
	}
	if b.n == 0 {
		return 0, io.EOF
	}
	k := min(len(p), b.n)
	if b.first > 0 {
		k = min(k, b.first)
		b.first -= k
	}
	for i := range k {
		p[i] = ' '
	}
	b.n -= k
	return k, nil
}
