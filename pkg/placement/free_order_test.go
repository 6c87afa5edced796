package placement_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// rankOnly hides a scorer's FreeOrderer extension, so that the planner ranks cards by RankGPU.
type rankOnly struct{ placement.Scorer }

// TestFreeOrderMatchesRanking checks that binpack's and spread's shortcut (comparing free
// units, as FreeOrderers) picks the card their RankGPU ranks first, on random nodes with unhealthy cards, mixed
// models and model-constrained asks.
func TestFreeOrderMatchesRanking(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	rng := rand.New(rand.NewPCG(7, 11))
	c := cache.New(contract.DefaultNames(), logger)
	var nodes []*placement.NodeInfo
	for i := range 300 {
		name := fmt.Sprintf("n%d", i)
		cards := 1 + rng.IntN(10)
		sizes := make([]int64, cards)
		for g := range sizes {
			sizes[g] = []int64{8, 16, 16, 32}[rng.IntN(4)]
		}
		nw := st.MakeNode(name).GPUs(sizes...)
		for g := range sizes {
			if rng.IntN(5) == 0 {
				nw.Unhealthy(g)
			}
			if rng.IntN(3) == 0 {
				nw.Model(g, "A100")
			}
		}
		c.SetNode(nw.Obj())
		for g, size := range sizes {
			if used := rng.Int64N(size + 1); used > 0 {
				c.SetPod(st.MakePod().Name(fmt.Sprintf("%s-%d", name, g)).GPUMem(used).Node(name).
					Placement(fmt.Sprintf(`{"0":{"%d":%d}}`, g, used)).Obj())
			}
		}
		n, _ := c.Node(name)
		nodes = append(nodes, n)
	}
	for _, p := range []placement.Policy{placement.Binpack{}, placement.Spread{}} {
		scorer := p.ForPod(placement.PodResources{})
		for _, models := range [][]string{nil, {"A100"}} {
			for units := int64(1); units <= 32; units *= 2 {
				req := &contract.PodRequest{Containers: []contract.ContainerRequest{{Key: "0", Units: units, GPUs: 1}}, Models: models}
				picked := 0
				for _, n := range nodes {
					fast, slow := card(n, req, scorer), card(n, req, rankOnly{scorer})
					if fast != slow {
						t.Fatalf("%s, %d units, models %v, node %s: shortcut picks card %d, RankGPU card %d", p.Name(), units, models, n.Name, fast, slow)
					}
					if fast >= 0 {
						picked++
					}
				}
				if picked == 0 && units <= 8 {
					t.Errorf("%s, %d units, models %v: no node fits; the test cluster is too full to compare", p.Name(), units, models)
				}
			}
		}
	}
}

// card is the card PlanPod chooses for the one-card request req on n, -1 for none.
func card(n *placement.NodeInfo, req *contract.PodRequest, scorer placement.Scorer) int {
	plan, ok := placement.PlanPod(n, req, scorer)
	if !ok {
		return -1
	}
	return plan.Slots[0].GPU
}
