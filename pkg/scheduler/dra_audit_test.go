package scheduler_test

import (
	"testing"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache/feed"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/scheduler"
)

// testDRADriver is the DRA driver the tests' extenders read (share-plugin --mode=dra's name).
const testDRADriver = "gpushare.aliyun.com"

// TestDRAAudit: in DRA mode Audit reads the truth of the driver's ResourceSlices and the
// ResourceClaims too. A cache fed the same objects equals it (before, every claim charge was a
// difference); a claim the cache missed is a difference; claims consuming more than a card has
// are reported over capacity.
func TestDRAAudit(t *testing.T) {
	slice := st.DRASlice("n0-slice", testDRADriver, "n0", 1, st.DRADevice(testDRADriver, 0, 16, ""), st.DRADevice(testDRADriver, 1, 16, ""))
	a := st.DRAClaim("a", "pa", "0", testDRADriver, "n0", map[string]int64{"gpu-0": 4})
	b := st.DRAClaim("b", "pb", "0", testDRADriver, "n0", map[string]int64{"gpu-0": 4, "gpu-1": 8})
	big := st.DRAClaim("big", "pbig", "0", testDRADriver, "n0", map[string]int64{"gpu-0": 16})
	other := st.DRAClaim("other", "po", "0", "other.example.com", "n0", map[string]int64{"gpu-1": 16})
	tests := []struct {
		name          string
		api, fed      []*resourceapi.ResourceClaim
		over, differs int
	}{
		{name: "the cache fed what the API has", api: []*resourceapi.ResourceClaim{a, b, other}, fed: []*resourceapi.ResourceClaim{a, b, other}},
		{name: "a claim the cache missed", api: []*resourceapi.ResourceClaim{a, b}, fed: []*resourceapi.ResourceClaim{a}, differs: 3}, // its pod, and both cards' use
		{name: "claims over a card's capacity", api: []*resourceapi.ResourceClaim{a, big}, fed: []*resourceapi.ResourceClaim{a, big}, over: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			node := st.MakeNode("n0").Obj()
			e := newEnvOpts(t, newPolicy(t, "binpack"), []scheduler.Option{scheduler.WithDRA(testDRADriver)}, nil)
			if _, err := e.client.CoreV1().Nodes().Create(e.ctx, node, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := e.client.ResourceV1().ResourceSlices().Create(e.ctx, slice, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			for _, c := range tt.api {
				if _, err := e.client.ResourceV1().ResourceClaims(c.Namespace).Create(e.ctx, c, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			e.cache.SetNode(node)
			f := feed.NewDRAFeed(e.cache, testDRADriver, contract.DefaultNames(), logger)
			f.SetSlice(slice)
			for _, c := range tt.fed {
				f.SetClaim(c)
			}
			r, err := e.ext.Audit(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Overcommitted) != tt.over || len(r.Differences) != tt.differs {
				t.Errorf("audit %+v: want %d cards over capacity and %d differences", r, tt.over, tt.differs)
			}
		})
	}
}
