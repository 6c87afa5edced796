package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// checkPluginMetrics scrapes a share-plugin's /metrics until it reports every card of gpus with
// its memory (units of 1 GiB) and a usage reading, and fails the test otherwise.
func (e *env) checkPluginMetrics(url string, gpus []contract.GPU) {
	e.t.Helper()
	client := &http.Client{Timeout: 5 * time.Second}
	var last map[string]float64
	err := poll(e.ctx, 30*time.Second, func() (bool, error) {
		m, err := framework.ScrapeMetrics(e.ctx, client, url)
		if err != nil {
			return false, err
		}
		last = m
		if m["gpushare_usage_last_sample_timestamp_seconds"] <= 0 {
			return false, fmt.Errorf("no usage reading yet")
		}
		for _, g := range gpus {
			if got, want := cardTotal(m, g.UUID), float64(g.Units<<30); got != want {
				return false, fmt.Errorf("card %s: gpushare_gpu_memory_total_bytes %v, want %v", g.UUID, got, want)
			}
		}
		return true, nil
	})
	if err != nil {
		e.t.Fatalf("share-plugin metrics at %s: %v\n%v", url, err, last)
	}
	e.t.Logf("share-plugin /metrics reports %d cards", len(gpus))
}

// cardTotal finds the gpushare_gpu_memory_total_bytes series of the card with uuid.
func cardTotal(m map[string]float64, uuid string) float64 {
	for series, v := range m {
		if strings.HasPrefix(series, "gpushare_gpu_memory_total_bytes{") && strings.Contains(series, `uuid="`+uuid+`"`) {
			return v
		}
	}
	return -1
}
