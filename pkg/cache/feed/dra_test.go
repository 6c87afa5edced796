package feed_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/cache/feed"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

const (
	testDriver = "gpushare.aliyun.com"
	gib        = int64(1) << 30
)

// newDRAFeed is a feed of a fresh cache that knows node n0's Node object.
func newDRAFeed(t *testing.T) (cache.Cache, *feed.DRAFeed) {
	logger, _ := ktesting.NewTestContext(t)
	c := cache.New(contract.DefaultNames(), logger)
	c.SetNode(st.MakeNode("n0").Obj())
	return c, feed.NewDRAFeed(c, testDriver, contract.DefaultNames(), logger)
}

// TestDRAFeedCards: a node's cards are its driver's devices in the order published (slices by
// name), memory in whole units, and a NoSchedule or NoExecute taint makes a card unhealthy;
// other drivers' slices and an older generation are ignored, and deleting the slices forgets
// the cards.
func TestDRAFeedCards(t *testing.T) {
	card := func(index int, units int64, healthy bool) placement.GPUInfo {
		return placement.GPUInfo{Index: index, UUID: "GPU-" + strconv.Itoa(index), Model: "Tesla T4", Capacity: units, Healthy: healthy}
	}
	tests := []struct {
		name   string
		slices []*resourceapi.ResourceSlice
		delete []*resourceapi.ResourceSlice
		want   []placement.GPUInfo
	}{
		{name: "published order, units, taints", slices: []*resourceapi.ResourceSlice{
			st.DRASlice("s", testDriver, "n0", 1, st.DRADevice(testDriver, 2, 16, ""), st.DRADevice(testDriver, 0, 32, resourceapi.DeviceTaintEffectNoSchedule),
				st.DRADevice(testDriver, 1, 16, resourceapi.DeviceTaintEffectNoExecute), st.DRADevice(testDriver, 3, 24, resourceapi.DeviceTaintEffectNone)),
		}, want: []placement.GPUInfo{card(2, 16, true), card(0, 32, false), card(1, 16, false), card(3, 24, true)}},
		{name: "slices by name, another driver and an old generation ignored", slices: []*resourceapi.ResourceSlice{
			st.DRASlice("s-b", testDriver, "n0", 2, st.DRADevice(testDriver, 1, 16, "")),
			st.DRASlice("s-a", testDriver, "n0", 2, st.DRADevice(testDriver, 0, 16, "")),
			st.DRASlice("s-old", testDriver, "n0", 1, st.DRADevice(testDriver, 7, 16, "")),
			st.DRASlice("other", "other.example.com", "n0", 5, st.DRADevice(testDriver, 9, 80, "")),
		}, want: []placement.GPUInfo{card(0, 16, true), card(1, 16, true)}},
		{name: "a slice replaced in place", slices: []*resourceapi.ResourceSlice{
			st.DRASlice("s", testDriver, "n0", 1, st.DRADevice(testDriver, 0, 16, "")),
			st.DRASlice("s", testDriver, "n0", 1, st.DRADevice(testDriver, 0, 16, resourceapi.DeviceTaintEffectNoSchedule)),
		}, want: []placement.GPUInfo{card(0, 16, false)}},
		{name: "every slice deleted", slices: []*resourceapi.ResourceSlice{st.DRASlice("s", testDriver, "n0", 1, st.DRADevice(testDriver, 0, 16, ""))},
			delete: []*resourceapi.ResourceSlice{st.DRASlice("s", testDriver, "n0", 1)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, f := newDRAFeed(t)
			for _, s := range tt.slices {
				f.SetSlice(s)
			}
			for _, s := range tt.delete {
				f.RemoveSlice(s)
			}
			n, ok := c.Node("n0")
			if !ok {
				t.Fatal("node n0 not in the cache")
			}
			if diff := cmp.Diff(tt.want, n.GPUs, cmp.Transformer("nilEmpty", func(g []placement.GPUInfo) []placement.GPUInfo {
				if len(g) == 0 {
					return nil
				}
				return g
			})); diff != "" {
				t.Errorf("cards (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDRAFeedClaims: an allocated claim charges its consumed memory, in units, to the cards it
// holds, as a placement of the pod it is reserved for; a device without consumed memory takes
// the whole card; a claim deallocated or deleted is released.
func TestDRAFeedClaims(t *testing.T) {
	tests := []struct {
		name      string
		claims    []*resourceapi.ResourceClaim
		deleted   []*resourceapi.ResourceClaim
		wantUsed  []int64
		wantAlloc map[string]contract.Allocation // pod name → placement
	}{
		{name: "two pods on one card, one on another", claims: []*resourceapi.ResourceClaim{
			st.DRAClaim("a", "pa", "0", testDriver, "n0", map[string]int64{"gpu-0": 4}),
			st.DRAClaim("b", "pb", "0", testDriver, "n0", map[string]int64{"gpu-0": 8}),
			st.DRAClaim("c", "pc", "0", testDriver, "n0", map[string]int64{"gpu-1": 2}),
		}, wantUsed: []int64{12, 2}, wantAlloc: map[string]contract.Allocation{
			"pa": {"0": {0: 4}}, "pb": {"0": {0: 8}}, "pc": {"0": {1: 2}}}},
		{name: "one pod, two containers, a two-card claim", claims: []*resourceapi.ResourceClaim{
			st.DRAClaim("main", "p", "0", testDriver, "n0", map[string]int64{"gpu-0": 3, "gpu-1": 3}),
			st.DRAClaim("side", "p", "1", testDriver, "n0", map[string]int64{"gpu-1": 5}),
		}, wantUsed: []int64{3, 8}, wantAlloc: map[string]contract.Allocation{"p": {"0": {0: 3, 1: 3}, "1": {1: 5}}}},
		{name: "no consumed memory: the whole card", claims: []*resourceapi.ResourceClaim{
			st.DRAClaim("a", "pa", "0", testDriver, "n0", map[string]int64{"gpu-1": 0}),
		}, wantUsed: []int64{0, 16}, wantAlloc: map[string]contract.Allocation{"pa": {"0": {1: 16}}}},
		{name: "deallocated", claims: []*resourceapi.ResourceClaim{
			st.DRAClaim("a", "pa", "0", testDriver, "n0", map[string]int64{"gpu-0": 4}),
			st.DRAClaim("a", "", "0", testDriver, "n0", nil),
		}, wantUsed: []int64{0, 0}, wantAlloc: map[string]contract.Allocation{}},
		{name: "deleted", claims: []*resourceapi.ResourceClaim{
			st.DRAClaim("a", "pa", "0", testDriver, "n0", map[string]int64{"gpu-0": 4}),
			st.DRAClaim("b", "pb", "0", testDriver, "n0", map[string]int64{"gpu-1": 4}),
		}, deleted: []*resourceapi.ResourceClaim{st.DRAClaim("a", "pa", "0", testDriver, "n0", nil)},
			wantUsed: []int64{0, 4}, wantAlloc: map[string]contract.Allocation{"pb": {"0": {1: 4}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, f := newDRAFeed(t)
			f.SetSlice(st.DRASlice("s", testDriver, "n0", 1, st.DRADevice(testDriver, 0, 16, ""), st.DRADevice(testDriver, 1, 16, "")))
			for _, cl := range tt.claims {
				f.SetClaim(cl)
			}
			for _, cl := range tt.deleted {
				f.RemoveClaim(cl)
			}
			n, _ := c.Node("n0")
			var used []int64
			for _, g := range n.GPUs {
				used = append(used, g.Used)
			}
			if diff := cmp.Diff(tt.wantUsed, used); diff != "" {
				t.Errorf("units used per card (-want,+got):\n%s", diff)
			}
			got := map[string]contract.Allocation{}
			for _, p := range n.Pods {
				got[p.Name] = p.Allocation
				if p.UID != types.UID("uid-"+p.Name) || p.State != placement.PodBound {
					t.Errorf("pod %s: UID %s state %s, want uid-%s and bound", p.Name, p.UID, p.State, p.Name)
				}
			}
			if diff := cmp.Diff(tt.wantAlloc, got); diff != "" {
				t.Errorf("placements (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestDRAFeedInformers: through the informers of a fake API server, a node's slice and an
// allocated claim reach the cache, and the claim's deletion releases its memory.
func TestDRAFeedInformers(t *testing.T) {
	c, f := newDRAFeed(t)
	client := fake.NewClientset(st.DRASlice("s", testDriver, "n0", 1, st.DRADevice(testDriver, 0, 16, "")),
		st.DRAClaim("a", "pa", "0", testDriver, "n0", map[string]int64{"gpu-0": 6}))
	factory := informers.NewSharedInformerFactory(client, 0)
	synced, err := feed.AddDRAEventHandlers(f, factory)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); factory.Shutdown() }()
	factory.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
		t.Fatal("informers did not sync")
	}
	used := func() int64 {
		n, ok := c.Node("n0")
		if !ok || len(n.GPUs) != 1 {
			return -1
		}
		return n.GPUs[0].Used
	}
	if got := used(); got != 6 {
		t.Fatalf("card 0 used %d units after sync, want 6", got)
	}
	if err := client.ResourceV1().ResourceClaims("default").Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return used() == 0, nil })
	if err != nil {
		t.Errorf("card 0 still used %d units after the claim's deletion", used())
	}
}
