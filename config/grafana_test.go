package config_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement/policies"
	"github.com/gpushare/gpushare/pkg/scheduler"
)

// TestGrafanaDashboardQueriesServedMetrics: every gpushare_ metric the dashboard queries is one
// the extender serves on /metrics (histograms by their _bucket series), so a renamed metric
// cannot leave a panel empty unnoticed.
func TestGrafanaDashboardQueriesServedMetrics(t *testing.T) {
	raw, err := os.ReadFile("grafana/gpushare-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard is not JSON: %v", err)
	}
	queried := map[string]string{} // metric → first panel
	name := regexp.MustCompile(`gpushare_[a-z_]+`)
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, m := range name.FindAllString(tg.Expr, -1) {
				if _, ok := queried[m]; !ok {
					queried[m] = p.Title
				}
			}
		}
	}
	served := servedMetrics(t)
	var missing []string
	for m, panel := range queried {
		if !served[m] {
			missing = append(missing, m+" (panel "+panel+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("the dashboard queries metrics the extender does not serve:\n  %s", strings.Join(missing, "\n  "))
	}
	if len(queried) < 10 {
		t.Errorf("the dashboard queries only %d metrics: %v", len(queried), queried)
	}
}

// servedMetrics is the set of series names an extender with one node serves on /metrics after
// a filter call that turns the node away (so that the per-reason counter has a series).
func servedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	names := contract.DefaultNames()
	c := cache.New(names, logger)
	c.SetNode(st.MakeNode("n1").GPUs(16).Obj())
	policy, err := policies.NewRegistry().New("binpack")
	if err != nil {
		t.Fatal(err)
	}
	ext := scheduler.NewExtender(c, fake.NewClientset(), policy, names)
	srv := httptest.NewServer(scheduler.NewHandler(ext, func() bool { return true }, scheduler.HandlerConfig{MaxBody: 1 << 20}, logger))
	defer srv.Close()
	pod, err := json.Marshal(st.MakePod().Name("big").GPUMem(32).Obj())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(srv.URL+scheduler.Prefix+"/filter", "application/json",
		strings.NewReader(`{"Pod":`+string(pod)+`,"NodeNames":["n1"]}`))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	resp, err = http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	out := map[string]bool{}
	for n, f := range families {
		out[n] = true
		if f.GetType().String() == "HISTOGRAM" {
			out[n+"_bucket"], out[n+"_sum"], out[n+"_count"] = true, true, true
		}
	}
	return out
}
