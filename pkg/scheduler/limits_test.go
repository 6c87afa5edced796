package scheduler

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"
)

// nameArray is a JSON array of n node names.
func nameArray(n int) string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%q", fmt.Sprintf("n%d", i))
	}
	return "[" + strings.Join(out, ",") + "]"
}

func TestHandlerBoundsItsInputs(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes, pods := routeFixture()
	ext, _ := extenderOn(logger, nodes, pods)
	pod := `{"metadata":{"name":"p","namespace":"default","uid":"uid-p"},"spec":{"containers":[{"name":"c","resources":{"limits":{"aliyun.com/gpu-mem":"4"}}}]}}`
	srv := httptest.NewServer(NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: 1 << 20}, logger))
	defer srv.Close()
	victims := func(n int) string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf(`"n%d":{"Pods":[]}`, i)
		}
		return `{"Pod":` + pod + `,"NodeNameToMetaVictims":{` + strings.Join(out, ",") + `}}`
	}
	tests := []struct {
		name, path, body string
		wantStatus       int
		want             string
	}{
		{"filter of MaxNodeNames", "/filter", `{"Pod":` + pod + `,"NodeNames":` + nameArray(MaxNodeNames) + `}`, http.StatusOK, `"NodeNames"`},
		{"filter of one name too many", "/filter", `{"Pod":` + pod + `,"NodeNames":` + nameArray(MaxNodeNames+1) + `}`, http.StatusBadRequest, "25001 candidate nodes, at most 25000 are accepted"},
		{"prioritize of one name too many", "/prioritize", `{"Pod":` + pod + `,"NodeNames":` + nameArray(MaxNodeNames+1) + `}`, http.StatusBadRequest, "25001 candidate nodes"},
		{"preempt of one node too many", "/preempt", victims(MaxNodeNames + 1), http.StatusBadRequest, "25001 candidate nodes"},
		{"body over MaxBody", "/filter", `{"Pod":` + pod + `,"NodeNames":` + nameArray(200000) + `}`, http.StatusRequestEntityTooLarge, "larger than the 1048576 the extender accepts"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, _, body := do(t, srv, http.MethodPost, Prefix+tc.path, tc.body)
			if status != tc.wantStatus || !strings.Contains(string(body), tc.want) {
				t.Errorf("POST %s = %d %.300s, want %d and %q", tc.path, status, body, tc.wantStatus, tc.want)
			}
		})
	}
}

// TestHandlerBudgetCountsBytesRead: the in-flight budget holds the body bytes actually read.
// Clients that announce large bodies and send nothing (the probe's slow bodies) hold nothing,
// and other calls are served; a client that sent most of its body and stalls holds what it
// sent, so a request whose bytes would go past the budget is refused with 503; once the
// stalled one ends, the same request is served and every byte is given back.
func TestHandlerBudgetCountsBytesRead(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes, pods := routeFixture()
	ext, _ := extenderOn(logger, nodes, pods)
	h, routes := newHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: 4096, MaxInflightBytes: 5000}, logger)
	srv := httptest.NewServer(routes)
	defer srv.Close()
	body := `{"Pod":null,"NodeNames":` + nameArray(300) + `}` // about 2,100 bytes

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
	if status, _, answer := do(t, srv, http.MethodPost, Prefix+"/filter", body); status != http.StatusOK {
		t.Errorf("filter beside four announced, unsent bodies = %d %s, want 200", status, answer)
	}
	for _, release := range releases {
		release()
	}
	wg.Wait()

	// One client sends 3,500 of its 4,000 bytes and stalls: 3,500 + 2,100 > 5,000.
	slow, release := newSlowBody(4000, 3500)
	wg.Add(1)
	go func() { defer wg.Done(); post(t, srv, slow, 4000) }()
	waitUntil(t, "the server to read the first 3,500 bytes", func() bool { return h.inflight.Load() >= 3500 })
	status, _, answer := do(t, srv, http.MethodPost, Prefix+"/filter", body)
	if status != http.StatusServiceUnavailable || !strings.Contains(string(answer), ErrBusy.Error()) {
		t.Errorf("request beside 3,500 bytes held = %d %s, want 503 %q", status, answer, ErrBusy)
	}
	release()
	wg.Wait()
	waitUntil(t, "the same request to be served", func() bool {
		status, _, _ := do(t, srv, http.MethodPost, Prefix+"/filter", body)
		return status == http.StatusOK
	})
	waitUntil(t, "every byte given back", func() bool { return h.inflight.Load() == 0 })
}

// TestHandlerBodyTimeout: a body that stalls is cut at BodyTimeout (408) and its bytes given
// back, instead of holding its share of the budget for the server's 30 s ReadTimeout.
func TestHandlerBodyTimeout(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes, pods := routeFixture()
	ext, _ := extenderOn(logger, nodes, pods)
	h, routes := newHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: 4096, BodyTimeout: 200 * time.Millisecond}, logger)
	srv := httptest.NewServer(routes)
	defer srv.Close()
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
	waitUntil(t, "every byte given back", func() bool { return h.inflight.Load() == 0 })
}

// post sends body, announced at n bytes, to filter and returns the answer (0 when none came).
func post(t *testing.T, srv *httptest.Server, body io.Reader, n int64) (int, string) {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+Prefix+"/filter", body)
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
