package fgd

import (
	"sync"

	"github.com/gpushare/gpushare/pkg/gpumem"
	"github.com/gpushare/gpushare/pkg/placement"
)

// modelMatcher memoises gpumem.ModelMatches for (constraint, card model) pairs, which the
// fragmentation sums ask for every node and task type. Safe for concurrent use.
type modelMatcher struct {
	mu   sync.RWMutex // guards seen
	seen map[[2]string]bool
}

func newModelMatcher() *modelMatcher { return &modelMatcher{seen: map[[2]string]bool{}} }

// mask has bit g set when card g of node accepts a task constrained to models (joined as key).
func (m *modelMatcher) mask(node *placement.NodeInfo, key string, models []string) uint64 {
	if key == "" {
		return ^uint64(0)
	}
	var out uint64
	for g := range node.GPUs {
		if g < 64 && m.accepts(key, models, node.GPUs[g].Model) {
			out |= 1 << g
		}
	}
	return out
}

func (m *modelMatcher) accepts(key string, models []string, model string) bool {
	k := [2]string{key, model}
	m.mu.RLock()
	ok, found := m.seen[k]
	m.mu.RUnlock()
	if found {
		return ok
	}
	req := gpumem.PodRequest{Models: models}
	ok = req.AcceptsModel(model)
	m.mu.Lock()
	m.seen[k] = ok
	m.mu.Unlock()
	return ok
}
