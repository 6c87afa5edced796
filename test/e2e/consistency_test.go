package e2e

import (
	"github.com/gpushare/gpushare/pkg/contract"
)

// checkConsistent asserts the invariants after scheduling: every bound gpu-mem pod carries a
// placement matching its request, no card holds more than its units, and the extender's
// cache (GET /gpushare-scheduler/inspect) equals the pods' annotations.
func (e *env) checkConsistent(cards map[string][]contract.GPU) {
	e.t.Helper()
	api, pods, err := e.apiUsage()
	if err != nil {
		e.t.Fatal(err)
	}
	if bad := overCapacity(api, cards); len(bad) > 0 {
		e.t.Fatalf("cards over capacity:\n%v\nusage:\n%s", bad, api)
	}
	cache, err := e.extenderUsage()
	if err != nil {
		e.t.Fatal(err)
	}
	if api.String() != cache.String() {
		e.t.Fatalf("extender cache differs from the pods' annotations (%d pods)\nannotations:\n%s\ncache:\n%s",
			len(pods), api, cache)
	}
	e.t.Logf("%d pods consistent; usage:\n%s", len(pods), api)
}
