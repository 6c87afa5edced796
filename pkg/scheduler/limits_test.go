package scheduler

import (
	"fmt"
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

// TestHandlerRefusesBodiesBeyondTheInflightBudget: while bodies of MaxInflightBytes are being
// served, another request is refused with 503 instead of being read; once they are done it is
// served.
func TestHandlerRefusesBodiesBeyondTheInflightBudget(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes, pods := routeFixture()
	ext, _ := extenderOn(logger, nodes, pods)
	h, routes := newHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: 4096, MaxInflightBytes: 6000}, logger)
	srv := httptest.NewServer(routes)
	defer srv.Close()

	// A client that declares 4,000 bytes and sends them slowly holds its reservation.
	slow, release := newSlowBody(4000)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+Prefix+"/filter", slow)
		req.ContentLength = 4000
		if resp, err := srv.Client().Do(req); err == nil {
			_ = resp.Body.Close()
		}
	}()
	<-slow.started
	for h.inflight.Load() == 0 { // until the server has taken the first request's reservation
		time.Sleep(time.Millisecond)
	}
	body := `{"Pod":null,"NodeNames":` + nameArray(300) + `}` // about 2,600 bytes: 4,000 + 2,600 > 6,000
	status, _, answer := do(t, srv, http.MethodPost, Prefix+"/filter", body)
	if status != http.StatusServiceUnavailable || !strings.Contains(string(answer), ErrBusy.Error()) {
		t.Errorf("second request while the first is read = %d %s, want 503 %q", status, answer, ErrBusy)
	}
	release()
	wg.Wait()
	// The first handler releases its reservation just after its answer reaches the client; a
	// reservation never released would keep refusing this one.
	deadline := time.Now().Add(5 * time.Second)
	for {
		status, _, answer := do(t, srv, http.MethodPost, Prefix+"/filter", body)
		if status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the same request afterwards = %d %s, want it served", status, answer)
		}
		time.Sleep(10 * time.Millisecond)
	}
	for h.inflight.Load() != 0 { // the last handler returns just after its answer
		if time.Now().After(deadline) {
			t.Fatalf("bytes still reserved after every request ended: %d", h.inflight.Load())
		}
		time.Sleep(time.Millisecond)
	}

}

// slowBody sends n bytes of spaces after release is called.
type slowBody struct {
	n       int
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func newSlowBody(n int) (*slowBody, func()) {
	b := &slowBody{n: n, started: make(chan struct{}), release: make(chan struct{})}
	return b, func() { close(b.release) }
}

func (b *slowBody) Read(p []byte) (int, error) {
	b.once.Do(func() { close(b.started) })
	<-b.release
	if b.n == 0 {
		return 0, fmt.Errorf("done")
	}
	k := min(len(p), b.n)
	for i := range k {
		p[i] = ' '
	}
	b.n -= k
	return k, nil
}
