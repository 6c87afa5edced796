package scheduler

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
)

// discardWriter is a ResponseWriter that counts and drops what it is sent.
type discardWriter struct {
	header http.Header
	n      int
}

func (d *discardWriter) Header() http.Header         { return d.header }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Write(p []byte) (int, error) { d.n += len(p); return len(p), nil }

// cardsHandler is the routes of an extender on nodes nodes of 8 cards each, /metrics served
// with ttl.
func cardsHandler(logger klog.Logger, nodes int, ttl time.Duration) http.Handler {
	ns := make([]*v1.Node, nodes)
	for i := range ns {
		ns[i] = st.MakeNode(fmt.Sprintf("node-%04d", i)).GPUs(16, 16, 16, 16, 16, 16, 16, 16).Obj()
	}
	ext, _ := extenderOn(logger, ns, nil)
	return NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: 1 << 20, MetricsTTL: ttl}, logger)
}

// scrapeOnce serves one gzip-accepting GET /metrics into w.
func scrapeOnce(h http.Handler, w *discardWriter) {
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	w.header = http.Header{}
	h.ServeHTTP(w, req)
}

// TestMetricsScrapesShareARendering: at 800 cards, scrapes within the TTL are served the bytes
// of one rendering: a handful of allocations each instead of a rendering of every card (eight
// unauthenticated scrapers in a loop raised filter's median from 3 to 14 ms).
func TestMetricsScrapesShareARendering(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	cached, rendering := cardsHandler(logger, 100, time.Hour), cardsHandler(logger, 100, -1)
	w := &discardWriter{}
	scrapeOnce(cached, w) // the one rendering
	allocs := testing.AllocsPerRun(20, func() { scrapeOnce(cached, w) })
	renderAllocs := testing.AllocsPerRun(5, func() { scrapeOnce(rendering, w) })
	t.Logf("allocations per scrape at 800 cards: %.0f within the TTL, %.0f rendering", allocs, renderAllocs)
	if allocs > 20 {
		t.Errorf("a scrape within the TTL made %.0f allocations, want at most 20: it rendered again", allocs)
	}
}

// TestMetricsTTL: a scrape within the TTL answers the last rendering; once it is older than the
// TTL the next scrape renders the cache's current state.
func TestMetricsTTL(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes, pods := routeFixture()
	ext, _ := extenderOn(logger, nodes, pods)
	srv := httptest.NewServer(NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: 1 << 20, MetricsTTL: 200 * time.Millisecond}, logger))
	defer srv.Close()
	nodesGauge := func() string {
		_, _, raw := do(t, srv, http.MethodGet, "/metrics", "")
		for _, line := range strings.Split(string(raw), "\n") {
			if strings.HasPrefix(line, "gpushare_cache_nodes ") {
				return line
			}
		}
		t.Fatalf("no gpushare_cache_nodes in\n%s", raw)
		return ""
	}
	before := nodesGauge()
	ext.cache.SetNode(st.MakeNode("n9").GPUs(8).Obj())
	if got := nodesGauge(); got != before {
		t.Errorf("within the TTL: %q, want the last rendering's %q", got, before)
	}
	time.Sleep(250 * time.Millisecond)
	if got, want := nodesGauge(), "gpushare_cache_nodes 5"; got != want {
		t.Errorf("after the TTL: %q, want %q", got, want)
	}
}

// BenchmarkMetricsScrapeTTL: one gzip scrape of /metrics at 100 nodes of 8 cards, served from
// the last rendering (cached) or rendered (uncached, as every scrape was before the TTL).
func BenchmarkMetricsScrapeTTL(b *testing.B) {
	logger := klog.Background()
	for _, tc := range []struct {
		name string
		ttl  time.Duration
	}{{"cached", time.Hour}, {"uncached", -1}} {
		b.Run(tc.name, func(b *testing.B) {
			h := cardsHandler(logger, 100, tc.ttl)
			w := &discardWriter{}
			scrapeOnce(h, w)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				scrapeOnce(h, w)
			}
		})
	}
}
