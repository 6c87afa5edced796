package preempt

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
)

// TestHoldsRebuild: a new leader (or a restarted extender) puts in force the holds pending pods
// carry, and only those: not a bound pod's, a deleted one's, a run-out one's, a malformed one or
// one whose MAC does not verify (unsigned, signed with another key, or copied from another
// pod); a hold that claims to last for days ends within MaxHold. The holds that do not verify
// are reported once. Other pods see the held units as used; the holder sees the card as it is.
func TestHoldsRebuild(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	key, otherKey := []byte(strings.Repeat("k", MinHoldKeyBytes)), []byte(strings.Repeat("o", MinHoldKeyBytes))
	ann := func(p *v1.Pod, until time.Time) *v1.Pod { return signHold(t, p, until, key, p.UID) }
	deleted := ann(st.MakePod().Name("deleted").UID("uid-deleted").GPUMem(8).Obj(), now.Add(time.Minute))
	deleted.DeletionTimestamp = &metav1.Time{Time: now}
	pods := []*v1.Pod{
		ann(st.MakePod().Name("held").UID("uid-held").GPUMem(8).Obj(), now.Add(time.Minute)),
		ann(st.MakePod().Name("forever").UID("uid-forever").GPUMem(8).Obj(), now.Add(90*24*time.Hour)),
		ann(st.MakePod().Name("bound").UID("uid-bound").GPUMem(8).Node("n1").Obj(), now.Add(time.Minute)),
		ann(st.MakePod().Name("over").UID("uid-over").GPUMem(8).Obj(), now.Add(-time.Second)),
		deleted,
		ann(st.MakePod().Name("greedy").UID("uid-greedy").GPUMem(2).Obj(), now.Add(time.Minute)),
		st.MakePod().Name("garbage").UID("uid-garbage").GPUMem(8).Annotation(contract.DefaultPreemptionKey, `{"node":`).Obj(),
		st.MakePod().Name("forged").UID("uid-forged").GPUMem(8).Annotation(contract.DefaultPreemptionKey,
			`{"node":"n1","gpu":0,"units":16,"until":"`+now.Add(time.Minute).Format(time.RFC3339)+`"}`).Obj(),
		signHold(t, st.MakePod().Name("other-key").UID("uid-other-key").GPUMem(8).Obj(), now.Add(time.Minute), otherKey, "uid-other-key"),
		signHold(t, st.MakePod().Name("copied").UID("uid-copied").GPUMem(8).Obj(), now.Add(time.Minute), key, "uid-held"),
	}
	index := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	for _, p := range pods {
		if err := index.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	s := newHolds(func() time.Time { return now })
	asks := func(p *v1.Pod) int64 {
		if p.Name == "greedy" {
			return 2 // asks less than the hold claims
		}
		return 8
	}
	ignored, err := s.rebuild(corelisters.NewPodLister(index), contract.DefaultPreemptionKey, key, asks)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"copied", "forged", "garbage", "other-key"}, podNames(ignored)); diff != "" {
		t.Errorf("holds reported ignored (-want,+got):\n%s", diff)
	}
	if again, err := s.rebuild(corelisters.NewPodLister(index), contract.DefaultPreemptionKey, key, asks); err != nil || len(again) != 0 {
		t.Errorf("a second rebuild reported %d ignored holds again (%v), want none: each is reported once", len(again), err)
	}
	got := map[string]time.Time{}
	for _, h := range s.all() {
		got[h.name] = h.Until
	}
	if len(got) != 2 || got["held"].IsZero() || got["forever"].IsZero() {
		t.Fatalf("holds in force %v, want held and forever only", got)
	}
	if want := now.Add(MaxHold); !got["forever"].Equal(want) {
		t.Errorf("a hold written to last 90 days ends %v, want within MaxHold (%v)", got["forever"], want)
	}

	logger, _ := ktesting.NewTestContext(t)
	c := cache.New(contract.DefaultNames(), logger)
	c.SetNode(st.MakeNode("n1").GPUs(16, 16).Obj())
	node, _ := c.Node("n1")
	if v := s.View(node, "uid-other"); v.UsableFree()[1] != 0 || v.UsableFree()[0] != 16 {
		t.Errorf("another pod sees cards free %v, want [16 0] (two holds of 8 on card 1)", v.UsableFree())
	}
	if v := s.View(node, "uid-held"); v.UsableFree()[1] != 8 {
		t.Errorf("the holder sees card 1 with %d free, want 8 (the other hold only)", v.UsableFree()[1])
	}
	if node.UsableFree()[1] != 16 {
		t.Error("view changed the cache's snapshot")
	}

	// The holder got bound: the sweep drops its hold.
	bound := pods[0].DeepCopy()
	bound.Spec.NodeName = "n1"
	if err := index.Update(bound); err != nil {
		t.Fatal(err)
	}
	dropped := s.expire(corelisters.NewPodLister(index))
	if len(dropped) != 1 || dropped[0].name != "held" {
		t.Errorf("sweep dropped %v, want the bound pod's hold", dropped)
	}
}

// signHold puts on p a hold of 8 units on GPU 1 of n1 until until, signed with key for uid.
func signHold(t *testing.T, p *v1.Pod, until time.Time, key []byte, uid types.UID) *v1.Pod {
	t.Helper()
	rec := HoldRecord{Node: "n1", GPU: 1, Units: 8, Until: until}
	rec.MAC = holdMAC(key, uid, &rec)
	raw, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	p.Annotations[contract.DefaultPreemptionKey] = string(raw)
	return p
}

// podNames is the pods' names, sorted.
func podNames(pods []*v1.Pod) []string {
	out := []string{}
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// TestHoldViewSkipsPlacedHolder: once the holder is charged on the node (assumed by its bind, or
// bound), its own allocation counts there and its hold no longer does, so that a bind running
// beside the holder's does not see the card full twice over.
func TestHoldViewSkipsPlacedHolder(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	logger, _ := ktesting.NewTestContext(t)
	c := cache.New(contract.DefaultNames(), logger)
	c.SetNode(st.MakeNode("n1").GPUs(16).Obj())
	s := newHolds(func() time.Time { return now })
	s.add(hold{HoldRecord: HoldRecord{Node: "n1", GPU: 0, Units: 8, Until: now.Add(time.Minute)}, pod: "uid-h", namespace: "default", name: "h"})
	tests := []struct {
		name     string
		holder   *v1.Pod // in the cache, if not nil
		wantFree int64
	}{
		{name: "holder pending: its 8 held", wantFree: 8},
		{name: "holder charged on the node: its 8 counted once", holder: st.MakePod().Name("h").GPUMem(8).Node("n1").Placement(`{"0":{"0":8}}`).Obj(), wantFree: 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.holder != nil {
				c.SetPod(tt.holder)
			}
			node, _ := c.Node("n1")
			if got := s.View(node, "uid-other").UsableFree()[0]; got != tt.wantFree {
				t.Errorf("another pod sees %d free, want %d", got, tt.wantFree)
			}
		})
	}
}
