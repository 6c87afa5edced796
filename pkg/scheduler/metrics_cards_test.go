package scheduler

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
)

// cardSamples parses text-format metrics and returns the per-card samples as
// "family card model node" → value.
func cardSamples(t *testing.T, raw []byte) map[string]float64 {
	t.Helper()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, raw)
	}
	out := map[string]float64{}
	for _, f := range cardFamilies {
		fam, ok := families[f.name]
		if !ok {
			t.Fatalf("no family %s in\n%s", f.name, raw)
		}
		if fam.GetHelp() != f.help || fam.GetType().String() != "GAUGE" {
			t.Errorf("%s: help %q, type %s", f.name, fam.GetHelp(), fam.GetType())
		}
		for _, m := range fam.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[f.name+" "+labels["card"]+" "+labels["model"]+" "+labels["node"]] = m.GetGauge().GetValue()
		}
	}
	return out
}

// TestWriteCardMetrics: every card's four series, written as text, read back by Prometheus's
// parser with their values and labels, a model with quotes and backslashes included.
func TestWriteCardMetrics(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	const odd = `Tesla "T4" \ PCIe`
	nodes := []*v1.Node{
		st.MakeNode("n1").GPUs(16, 16).Model(0, odd).Unhealthy(1).Obj(),
		st.MakeNode("n2").GPUs(8).Obj(),
	}
	pods := []*v1.Pod{
		st.MakePod().Name("a").GPUMem(6).Node("n1").Placement(`{"0":{"0":6}}`).Obj(),
		st.MakePod().Name("b").GPUMem(2).Node("n1").Placement(`{"0":{"0":2}}`).Obj(),
	}
	ext, _ := extenderOn(logger, nodes, pods)
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := writeCardMetrics(w, ext.cache.Nodes(), 1<<30); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	got := cardSamples(t, buf.Bytes())
	const gib = 1 << 30
	want := map[string]float64{
		"gpushare_card_capacity_bytes 0 " + odd + " n1": 16 * gib,
		"gpushare_card_allocated_bytes 0  n1":           8 * gib,
		"gpushare_card_allocated_bytes 1  n1":           0,
		"gpushare_card_allocated_bytes 0  n2":           0,
		"gpushare_card_pods 0  n1":                      2,
		"gpushare_card_pods 1  n1":                      0,
		"gpushare_card_pods 0  n2":                      0,
		"gpushare_card_healthy 0  n1":                   1,
		"gpushare_card_healthy 1  n1":                   0,
		"gpushare_card_healthy 0  n2":                   1,
	}
	for key, v := range want {
		if g, ok := got[key]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", key, g, ok, v)
		}
	}
	if n := len(got); n != 3*4 {
		t.Errorf("%d card samples, want 12 (3 cards x 4 families)", n)
	}
}

// TestMetricsGzip: a scraper that accepts gzip gets the same metrics compressed.
func TestMetricsGzip(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes, pods := routeFixture()
	ext, _ := extenderOn(logger, nodes, pods)
	srv := httptest.NewServer(NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: testBodyLimit}, logger))
	defer srv.Close()
	get := func(gz bool) []byte {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/metrics", nil)
		if err != nil {
			t.Fatal(err)
		}
		if gz {
			req.Header.Set("Accept-Encoding", "gzip")
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		var body io.Reader = resp.Body
		if enc := resp.Header.Get("Content-Encoding"); (enc == "gzip") != gz {
			t.Fatalf("gzip asked %v, Content-Encoding %q", gz, enc)
		}
		if gz {
			zr, err := gzip.NewReader(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			body = zr
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	plain, zipped := cardSamples(t, get(false)), cardSamples(t, get(true))
	if diff := cmp.Diff(plain, zipped); diff != "" {
		t.Errorf("card samples differ with gzip (-plain,+gzip):\n%s", diff)
	}
	if len(plain) == 0 {
		t.Error("no card samples")
	}
}

// BenchmarkMetricsScrape: one /metrics rendering at 5,000 nodes of 8 cards (160,000 card
// series), without the TTL that serves one rendering to every scrape for a second.
func BenchmarkMetricsScrape(b *testing.B) {
	logger, _ := ktesting.NewTestContext(b)
	var nodes []*v1.Node
	for i := range 5000 {
		nodes = append(nodes, st.MakeNode(fmt.Sprintf("node-%05d", i)).GPUs(16, 16, 16, 16, 16, 16, 16, 16).Obj())
	}
	ext, _ := extenderOn(logger, nodes, nil)
	h := NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: testBodyLimit, MetricsTTL: -1}, logger)
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		rec.Body = nil // keep the answer's bytes out of the measure
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	}
}
