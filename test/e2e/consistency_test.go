package e2e

import (
	"fmt"
	"strings"
	"time"

	"github.com/gpushare/gpushare/pkg/contract"
)

// checkConsistent asserts the invariants after scheduling: every bound gpu-mem pod carries a
// placement matching its request, no card holds more than its units, the extender's cache
// (GET /gpushare-scheduler/inspect) equals the pods' annotations, per card and per pod, and the
// extender's own invariant check (GET /gpushare-scheduler/debug/audit) finds no card over
// capacity and no difference between its cache and the API server's nodes and pods.
// The cache is fed by informers, so it gets time to catch up: after an API server restart
// client-go's reflectors back off (up to 30 s between attempts) before they list again, and
// until then the cache keeps the extender's own binds as assumed.
func (e *env) checkConsistent(cards map[string][]contract.GPU) {
	e.t.Helper()
	var last error
	var api usage
	var n int
	err := poll(e.ctx, 45*time.Second, func() (bool, error) {
		last = e.compareOnce(cards, &api, &n)
		return last == nil, last
	})
	if err != nil {
		e.t.Fatal(last)
	}
	e.t.Logf("%d pods consistent with the extender's cache; usage:\n%s", n, api)
}

func (e *env) compareOnce(cards map[string][]contract.GPU, apiOut *usage, n *int) error {
	api, pods, err := e.apiUsage()
	if err != nil {
		return err
	}
	*apiOut, *n = api, len(pods)
	if bad := overCapacity(api, cards); len(bad) > 0 {
		return fmt.Errorf("cards over capacity:\n%v\nusage:\n%s", bad, api)
	}
	cache, cachePods, err := e.extenderUsage()
	if err != nil {
		return err
	}
	if api.String() != cache.String() {
		return fmt.Errorf("extender cache differs from the pods' annotations (%d pods)\nannotations:\n%s\ncache:\n%s",
			len(pods), api, cache)
	}
	if want, got := strings.Join(apiPlacements(pods), "\n"), strings.Join(cachePods, "\n"); want != got {
		return fmt.Errorf("extender's pods differ from the API's\nAPI:\n%s\ncache:\n%s", want, got)
	}
	var audit struct {
		Overcommitted []string `json:"overcommitted"`
		Differences   []string `json:"differences"`
	}
	if err := e.ext.GetJSON(e.ctx, "/gpushare-scheduler/debug/audit", &audit); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	if len(audit.Overcommitted)+len(audit.Differences) > 0 {
		return fmt.Errorf("extender's audit: cards over capacity %v; cache differs from the API: %v", audit.Overcommitted, audit.Differences)
	}
	return nil
}
