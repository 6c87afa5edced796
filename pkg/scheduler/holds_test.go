package scheduler

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
)

// TestHoldsRebuild: a new leader (or a restarted extender) puts in force the holds pending pods
// carry, and only those: not a bound pod's, a deleted one's, a run-out one's or a malformed one;
// a hold that claims to last for days ends within MaxHold. Other pods see the held units as
// used; the holder sees the card as it is.
func TestHoldsRebuild(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ann := func(p *v1.Pod, until time.Time) *v1.Pod {
		rec := `{"node":"n1","gpu":1,"units":8,"until":"` + until.Format(time.RFC3339) + `"}`
		p.Annotations[contract.DefaultPreemptionKey] = rec
		return p
	}
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
	}
	index := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	for _, p := range pods {
		if err := index.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	s := newHoldSet(func() time.Time { return now })
	asks := func(p *v1.Pod) int64 {
		if p.Name == "greedy" {
			return 2 // asks less than the hold claims
		}
		return 8
	}
	if err := s.rebuild(corelisters.NewPodLister(index), contract.DefaultPreemptionKey, asks); err != nil {
		t.Fatal(err)
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
	if v := s.view(node, "uid-other"); v.UsableFree()[1] != 0 || v.UsableFree()[0] != 16 {
		t.Errorf("another pod sees cards free %v, want [16 0] (two holds of 8 on card 1)", v.UsableFree())
	}
	if v := s.view(node, "uid-held"); v.UsableFree()[1] != 8 {
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
