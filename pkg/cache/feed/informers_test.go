package feed_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/cache/feed"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
)

// slowCache is a Cache whose SetPod takes a while, as it does for tens of thousands of pods.
type slowCache struct {
	cache.Cache
	pods atomic.Int64
}

func (s *slowCache) SetPod(p *v1.Pod) {
	time.Sleep(200 * time.Microsecond)
	s.Cache.SetPod(p)
	s.pods.Add(1)
}

// TestPodFeedSyncedMeansDelivered: when the pod feed and the node handler say synced, the cache
// has received every pod and node of the first lists (the extender answers once they say so; a
// cache short of pods sees used cards as free).
func TestPodFeedSyncedMeansDelivered(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	const n = 2000
	objs := []runtime.Object{st.MakeNode("gpu").GPUs(16, 16).Obj()}
	for i := range n {
		objs = append(objs, st.MakePod().Name(fmt.Sprintf("p%04d", i)).GPUMem(1).Node("gpu").
			Placement(fmt.Sprintf(`{"0":{"%d":1}}`, i%2)).Obj())
	}
	c := &slowCache{Cache: cache.New(contract.DefaultNames(), logger)}
	client := fake.NewClientset(objs...)
	// The fake API server drops events that happen before a watch starts (a real one replays
	// them from the list's resourceVersion), so the test waits for the feed's watch before it
	// deletes.
	podWatchStarted := make(chan struct{})
	var once sync.Once
	client.PrependWatchReactor("pods", func(action clienttesting.Action) (bool, watch.Interface, error) {
		var opts metav1.ListOptions
		if wa, ok := action.(clienttesting.WatchActionImpl); ok {
			opts = wa.ListOptions
		}
		w, err := client.Tracker().Watch(action.GetResource(), action.GetNamespace(), opts)
		if err != nil {
			return true, nil, err
		}
		once.Do(func() { close(podWatchStarted) })
		return true, w, nil
	})
	factory := informers.NewSharedInformerFactory(client, 0)
	nodesSynced, err := feed.AddNodeEventHandlers(c, factory, contract.DefaultNames())
	if err != nil {
		t.Fatal(err)
	}
	feed := feed.NewPodFeed(c, contract.DefaultNames())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	factory.Start(ctx.Done())
	go feed.Run(ctx, feed.ListWatch(client))
	defer func() { cancel(); factory.Shutdown() }()
	if !toolscache.WaitForCacheSync(ctx.Done(), nodesSynced, feed.HasSynced) {
		t.Fatal("never synced")
	}
	if got := c.pods.Load(); got != n {
		t.Errorf("synced with %d of %d pods handed to the cache", got, n)
	}
	if _, ok := c.Node("gpu"); !ok {
		t.Error("synced without the node")
	}
	// Afterwards the watch feeds the cache: a deleted pod leaves it.
	select {
	case <-podWatchStarted:
	case <-ctx.Done():
		t.Fatal("the pod feed never started its watch")
	}
	if err := client.CoreV1().Pods("default").Delete(ctx, "p0000", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, ok := c.Pod("uid-p0000")
		return !ok, nil
	}); err != nil {
		t.Errorf("deleted pod still in the cache: %v", err)
	}
}

// TestPodFeed: the feed hands every event to the cache and keeps whole only the pods not bound
// yet, which its lister returns; bound pods are not found there (Bind reads them from the API).
func TestPodFeed(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	names := contract.DefaultNames()
	node := st.MakeNode("gpu").GPUs(16).Obj()
	pending := st.MakePod().Name("a").GPUMem(4).Annotation("note", "kept while pending").Obj()
	bound := st.MakePod().Name("a").GPUMem(4).Node("gpu").Placement(`{"0":{"0":4}}`).Annotation("note", "dropped").Obj()
	other := st.MakePod().Name("b").GPUMem(2).Node("gpu").Placement(`{"0":{"0":2}}`).Obj()
	recreated := st.MakePod().Name("b").UID("uid-b2").GPUMem(3).Node("gpu").Placement(`{"0":{"0":3}}`).Obj()

	used := func(c cache.Cache) int64 {
		n, ok := c.Node("gpu")
		if !ok {
			t.Fatal("node gone")
		}
		return n.UsedUnits()
	}
	for _, tt := range []struct {
		name string
		// run drives the feed; wantUsed is the node's used units after, wantListed the pending
		// pods the lister returns (names).
		run        func(t *testing.T, f *feed.PodFeed)
		wantUsed   int64
		wantListed []string
	}{
		{
			name: "pending pod is listed, charges nothing",
			run: func(t *testing.T, f *feed.PodFeed) {
				mustNil(t, f.Add(pending.DeepCopy()))
			},
			wantListed: []string{"a"},
		},
		{
			name: "bound pod charges its card and leaves the lister",
			run: func(t *testing.T, f *feed.PodFeed) {
				mustNil(t, f.Add(pending.DeepCopy()))
				mustNil(t, f.Update(bound.DeepCopy()))
			},
			wantUsed: 4,
		},
		{
			name: "deleted pod is uncharged",
			run: func(t *testing.T, f *feed.PodFeed) {
				mustNil(t, f.Add(bound.DeepCopy()))
				mustNil(t, f.Add(other.DeepCopy()))
				mustNil(t, f.Delete(bound.DeepCopy()))
			},
			wantUsed: 2,
		},
		{
			name: "a relist without a pod removes it, bound or pending",
			run: func(t *testing.T, f *feed.PodFeed) {
				mustNil(t, f.Add(bound.DeepCopy()))
				mustNil(t, f.Add(other.DeepCopy()))
				p := st.MakePod().Name("c").GPUMem(1).Obj()
				mustNil(t, f.Add(p))
				mustNil(t, f.Replace([]any{other.DeepCopy()}, "42"))
				if got := f.LastStoreSyncResourceVersion(); got != "42" {
					t.Errorf("resource version %q after the relist, want 42", got)
				}
			},
			wantUsed: 2,
		},
		{
			name: "a pod recreated under the same name drops the old one's charge",
			run: func(t *testing.T, f *feed.PodFeed) {
				mustNil(t, f.Add(other.DeepCopy()))
				mustNil(t, f.Update(recreated.DeepCopy()))
			},
			wantUsed: 3,
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := cache.New(names, logger)
			c.SetNode(node)
			f := feed.NewPodFeed(c, names)
			tt.run(t, f)
			if got := used(c); got != tt.wantUsed {
				t.Errorf("used units %d, want %d", got, tt.wantUsed)
			}
			listed, err := f.Lister().List(labels.Everything())
			mustNil(t, err)
			var got []string
			for _, p := range listed {
				got = append(got, p.Name)
			}
			if diff := cmp.Diff(tt.wantListed, got); diff != "" {
				t.Errorf("pending pods listed (-want,+got):\n%s", diff)
			}
			for _, name := range tt.wantListed {
				p, err := f.Lister().Pods("default").Get(name)
				if err != nil || p.Annotations["note"] == "" {
					t.Errorf("Get(%s) = %v, %v; want the pending pod with its annotations", name, p, err)
				}
			}
			if _, err := f.Lister().Pods("default").Get("b"); !apierrors.IsNotFound(err) {
				t.Errorf("Get of a bound pod: %v, want NotFound", err)
			}
		})
	}
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestPodFeedListsPageByPage: the feed's list reads pods in pages and hands each page to the
// cache before it reads the next (a first list of 50,000 pods is never held whole), and the
// list completes as a relist: a pod the feed held that the list lacks leaves the cache.
func TestPodFeedListsPageByPage(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	const n = 1250
	var pods []v1.Pod
	for i := range n {
		pods = append(pods, *st.MakePod().Name(fmt.Sprintf("p%04d", i)).GPUMem(1).Node("gpu").
			Placement(fmt.Sprintf(`{"0":{"%d":1}}`, i%2)).Obj())
	}
	c := &slowCache{Cache: cache.New(contract.DefaultNames(), logger)}
	c.SetNode(st.MakeNode("gpu").GPUs(2, 1000).Obj())
	feed := feed.NewPodFeed(c, contract.DefaultNames())
	stale := st.MakePod().Name("stale").GPUMem(3).Node("gpu").Placement(`{"0":{"0":3}}`).Obj()
	mustNil(t, feed.Add(stale))
	base := c.pods.Load()

	type call struct {
		Limit          int64
		Continue       string
		DeliveredFirst int64 // listed pods the cache had when the page was asked for
	}
	var (
		mu    sync.Mutex
		calls []call
	)
	client := fake.NewClientset()
	client.PrependReactor("list", "pods", func(action clienttesting.Action) (bool, runtime.Object, error) {
		opts := action.(clienttesting.ListActionImpl).ListOptions
		from := 0
		if opts.Continue != "" {
			if _, err := fmt.Sscan(opts.Continue, &from); err != nil {
				return true, nil, err
			}
		}
		mu.Lock()
		calls = append(calls, call{Limit: opts.Limit, Continue: opts.Continue, DeliveredFirst: c.pods.Load() - base})
		mu.Unlock()
		to := min(from+int(opts.Limit), n)
		if opts.Limit == 0 {
			to = n
		}
		list := &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "7"}, Items: pods[from:to]}
		if to < n {
			list.Continue = fmt.Sprint(to)
		}
		return true, list, nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	go feed.Run(ctx, feed.ListWatch(client))
	if !toolscache.WaitForCacheSync(ctx.Done(), feed.HasSynced) {
		t.Fatal("never synced")
	}
	mu.Lock()
	want := []call{{Limit: 500}, {Limit: 500, Continue: "500", DeliveredFirst: 500}, {Limit: 500, Continue: "1000", DeliveredFirst: 1000}}
	if diff := cmp.Diff(want, calls[:min(len(calls), 3)]); diff != "" {
		t.Errorf("list calls (-want,+got):\n%s", diff)
	}
	mu.Unlock()
	if got := c.pods.Load() - base; got != n {
		t.Errorf("%d of %d listed pods handed to the cache", got, n)
	}
	if _, ok := c.Pod(stale.UID); ok {
		t.Error("a pod the list lacks is still in the cache")
	}
	if got := feed.LastStoreSyncResourceVersion(); got != "7" {
		t.Errorf("resource version %q after the list, want 7", got)
	}
	node, _ := c.Node("gpu")
	if got := node.UsedUnits(); got != n {
		t.Errorf("used units %d, want %d (one per listed pod)", got, n)
	}
}
