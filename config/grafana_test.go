package config_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
	"github.com/gpushare/gpushare/pkg/deviceplugin/usage"
	"github.com/gpushare/gpushare/pkg/placement/policies"
	"github.com/gpushare/gpushare/pkg/scheduler"
)

// TestGrafanaDashboardQueriesServedMetrics: every gpushare_ metric the dashboard queries is one
// the extender or the share-plugin serves on /metrics (histograms by their _bucket series), so a
// renamed metric cannot leave a panel empty unnoticed.
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
	for m := range pluginMetrics(t) {
		served[m] = true
	}
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

// pluginMetrics is the set of series names a share-plugin serves after reading one mocked card
// with a container over its ask on it.
func pluginMetrics(t *testing.T) map[string]bool {
	t.Helper()
	h, err := mockhost.New("dgxa100", mockhost.Options{GPUs: 1, MemoryBytes: 16 << 30})
	if err != nil {
		t.Fatal(err)
	}
	h.SetUsage(0, 50, []gonvml.ProcessInfo{{Pid: 10, UsedGpuMemory: 2 << 30}})
	lib := nvml.New(h)
	if err := lib.Init(); err != nil {
		t.Fatal(err)
	}
	pod := st.MakePod().Name("p").GPUMem(1).Node("n1").Obj()
	pod.Status.ContainerStatuses = []v1.ContainerStatus{{Name: pod.Spec.Containers[0].Name, ContainerID: "containerd://c1"}}
	out := map[string]bool{}
	// a node without limits (the over-request series) and one with (the limit series)
	for _, mode := range []string{contract.MemoryLimitNone, contract.MemoryLimitHAMiCore} {
		pod := pod.DeepCopy()
		pod.Annotations[contract.AnnotationAllocation] = `{"0":{"0":1}}`
		s, err := usage.New(usage.Config{NVML: lib, Pods: onePod{pod}, Owners: ownerOf{usage.Owner{PodUID: string(pod.UID), ContainerID: "c1"}},
			Names: contract.DefaultNames(), MemoryLimit: mode, MemoryLimitConfigured: mode})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Sample(context.Background()); err != nil {
			t.Fatal(err)
		}
		reg := prometheus.NewRegistry()
		reg.MustRegister(s)
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			out[f.GetName()] = true
		}
	}
	if !out["gpushare_container_gpu_memory_over_request_bytes"] {
		t.Fatalf("the plugin's reading has no container over its ask: %v", out)
	}
	return out
}

type onePod struct{ pod *v1.Pod }

func (p onePod) NodePods(context.Context) ([]*v1.Pod, error) { return []*v1.Pod{p.pod}, nil }

type ownerOf struct{ o usage.Owner }

func (o ownerOf) OwnerOf(uint32) (usage.Owner, error) { return o.o, nil }
