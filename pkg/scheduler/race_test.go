package scheduler

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// raceResults collects what the binders saw.
type raceResults struct {
	mu       sync.Mutex
	boundTo  map[string]string // pod → node of its successful bind(s)
	failures int
}

func (r *raceResults) record(t *testing.T, pod, node string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.failures++
		return
	}
	if prev, ok := r.boundTo[pod]; ok && prev != node {
		t.Errorf("pod %s was bound to %s and then, by a retried bind, to %s", pod, prev, node)
	}
	r.boundTo[pod] = node
}

// TestConcurrentBindAndInformerEvents hammers Bind from many goroutines, every pod twice
// (a retried bind racing the first), on a few nodes with small cards, while an informer-like
// goroutine confirms bound pods (SetPod), deletes a third of them (API delete, then
// RemovePod), another re-publishes the nodes (SetNode) and another reads snapshots. Run it
// with -race. No card may ever be over capacity, in the cache or in the annotations written to
// the API; every bind's annotation must be the cache's allocation; no bind may move a pod; and
// after a relist the cache must equal the API.
func TestConcurrentBindAndInformerEvents(t *testing.T) {
	const binders, podCount = 8, 90
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(1)))
	ctx := klog.NewContext(t.Context(), logger)
	nodes := []*v1.Node{st.MakeNode("r0").GPUs(4, 4).Obj(), st.MakeNode("r1").GPUs(6).Obj(), st.MakeNode("r2").GPUs(3, 5, 2).Obj()}
	var pods []*v1.Pod
	for i := range podCount {
		pods = append(pods, st.MakePod().Name(fmt.Sprintf("q%02d", i)).GPUMem(int64(1+i%3)).Obj())
	}
	ext, api := extenderOn(logger, nodes, pods)
	c := ext.Cache()
	res := &raceResults{boundTo: map[string]string{}}

	type task struct {
		pod   string
		first int
	}
	tasks, events, done := make(chan task), make(chan string, 2*podCount), make(chan struct{})
	var bindWG, bgWG sync.WaitGroup
	for range binders {
		bindWG.Go(func() {
			for tk := range tasks {
				for k := range nodes {
					node := nodes[(tk.first+k)%len(nodes)].Name
					err := ext.Bind(ctx, &extenderv1.ExtenderBindingArgs{PodName: tk.pod, PodNamespace: "default", PodUID: types.UID("uid-" + tk.pod), Node: node})
					res.record(t, tk.pod, node, err)
					if err == nil {
						events <- tk.pod
						break
					}
				}
			}
		})
	}
	deleted := map[string]bool{}
	bgWG.Go(func() { informer(ctx, t, c, api, events, deleted) })
	bgWG.Go(func() { republishNodes(c, nodes, done) })
	bgWG.Go(func() {
		for {
			checkSnapshots(t, c.Nodes())
			select {
			case <-done:
				return
			default:
			}
		}
	})
	for i := range pods {
		for range 2 {
			tasks <- task{pod: pods[i].Name, first: i % len(nodes)}
		}
	}
	close(tasks)
	bindWG.Wait()
	close(events)
	close(done)
	bgWG.Wait()

	if len(res.boundTo) == 0 || res.failures == 0 {
		t.Fatalf("the test did not exercise both outcomes: %d pods bound, %d failed binds", len(res.boundTo), res.failures)
	}
	checkSnapshots(t, c.Nodes())
	live := livePods(ctx, t, api)
	apiUse := checkAPIUse(t, c, live)
	checkCacheMatchesAnnotations(t, c, live, res.boundTo, deleted)
	for _, p := range live { // a relist, as after a restart of the informers
		c.SetPod(p)
	}
	cacheUse := map[string]map[int]int64{}
	for _, n := range c.Nodes() {
		for _, g := range n.GPUs {
			if g.Used > 0 {
				if cacheUse[n.Name] == nil {
					cacheUse[n.Name] = map[int]int64{}
				}
				cacheUse[n.Name][g.Index] = g.Used
			}
		}
	}
	if diff := cmp.Diff(apiUse, cacheUse); diff != "" {
		t.Errorf("per-card use, API annotations vs cache after relist (-api,+cache):\n%s", diff)
	}
}

// informer confirms every bound pod from the API and deletes every third one (API, then
// cache), until events is closed. deleted is written only here and read after it returns.
func informer(ctx context.Context, t *testing.T, c cache.Cache, api kubernetes.Interface, events <-chan string, deleted map[string]bool) {
	pods := api.CoreV1().Pods("default")
	seen := 0
	for name := range events {
		if deleted[name] {
			continue // the retried bind of a deleted pod reported success too
		}
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("get bound pod %s: %v", name, err)
			continue
		}
		c.SetPod(p)
		if seen++; seen%3 != 0 {
			continue
		}
		if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete pod %s: %v", name, err)
			continue
		}
		deleted[name] = true
		c.RemovePod(p)
	}
}

// republishNodes sets every node again, with a changing label and unchanged GPUs, until done.
func republishNodes(c cache.Cache, nodes []*v1.Node, done <-chan struct{}) {
	for gen := 0; ; gen++ {
		for _, n := range nodes {
			n = n.DeepCopy()
			n.Labels = map[string]string{"gen": fmt.Sprint(gen)}
			c.SetNode(n)
		}
		select {
		case <-done:
			return
		default:
		}
	}
}

// checkSnapshots fails the test for any card over capacity or any pending units (every pod
// here carries a placement).
func checkSnapshots(t *testing.T, nodes []*placement.NodeInfo) {
	for _, n := range nodes {
		for _, g := range n.GPUs {
			if g.Used > g.Capacity {
				t.Errorf("node %s GPU %d: %d units used of %d", n.Name, g.Index, g.Used, g.Capacity)
			}
		}
		if n.PendingUnits != 0 {
			t.Errorf("node %s: %d pending units, want 0", n.Name, n.PendingUnits)
		}
	}
}

func podPlacement(p *v1.Pod) (contract.Allocation, error) {
	raw, ok := p.Annotations[contract.AnnotationAllocation]
	if !ok {
		return nil, errors.New("bound pod without a placement annotation")
	}
	return contract.DecodeAllocation(raw)
}

// checkAPIUse sums the placement annotations of the bound pods in the API per card, fails the
// test for a card over capacity, and returns the sums.
func checkAPIUse(t *testing.T, c cache.Cache, live []*v1.Pod) map[string]map[int]int64 {
	use := map[string]map[int]int64{}
	for _, p := range live {
		if p.Spec.NodeName == "" {
			continue
		}
		alloc, err := podPlacement(p)
		if err != nil {
			t.Errorf("pod %s on %s: %v", p.Name, p.Spec.NodeName, err)
			continue
		}
		if use[p.Spec.NodeName] == nil {
			use[p.Spec.NodeName] = map[int]int64{}
		}
		for g, u := range alloc.PerGPU() {
			use[p.Spec.NodeName][g] += u
		}
	}
	for node, gpus := range use {
		n, ok := c.Node(node)
		if !ok {
			t.Errorf("node %s unknown to the cache", node)
			continue
		}
		for g, u := range gpus {
			if pos, ok := n.Position(g); !ok || u > n.GPUs[pos].Capacity {
				t.Errorf("node %s GPU %d: the API's annotations place %d units on a card it does not have or over its capacity", node, g, u)
			}
		}
	}
	return use
}

// checkCacheMatchesAnnotations checks that every pod bound and not deleted is in the cache,
// bound to the node of its bind, with the allocation its annotation names; and that deleted
// pods and pods never bound are not in the cache.
func checkCacheMatchesAnnotations(t *testing.T, c cache.Cache, live []*v1.Pod, boundTo map[string]string, deleted map[string]bool) {
	for _, p := range live {
		info, inCache := c.Pod(p.UID)
		node, bound := boundTo[p.Name]
		switch {
		case !bound:
			if inCache || p.Spec.NodeName != "" {
				t.Errorf("pod %s was never bound, but the cache has %+v and the API node %q", p.Name, info, p.Spec.NodeName)
			}
			continue
		case !inCache:
			t.Errorf("pod %s bound to %s is not in the cache", p.Name, node)
			continue
		}
		alloc, err := podPlacement(p)
		if err != nil {
			t.Errorf("pod %s: %v", p.Name, err)
		}
		want := struct {
			Node  string
			State placement.PodState
			Alloc contract.Allocation
		}{node, placement.PodBound, alloc}
		got := want
		got.Node, got.State, got.Alloc = info.Node, info.State, info.Allocation
		if p.Spec.NodeName != node {
			t.Errorf("pod %s: bind answered success for %s, API has node %q", p.Name, node, p.Spec.NodeName)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("pod %s: annotation vs cache (-want,+got):\n%s", p.Name, diff)
		}
	}
	for name := range deleted {
		if _, ok := c.Pod(types.UID("uid-" + name)); ok {
			t.Errorf("deleted pod %s is still in the cache", name)
		}
	}
}

// livePods lists the pods in the API.
func livePods(ctx context.Context, t *testing.T, api kubernetes.Interface) []*v1.Pod {
	list, err := api.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list pods: %v", err)
	}
	out := make([]*v1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out
}

// TestRetriedBindDoesNotResurrectDeletedPod replays, deterministically, an interleaving the
// concurrent test found: a retried bind reads the pod (already bound by the first attempt),
// the pod is then deleted and the informer removes it from the cache, and only then does the
// retried bind answer. The stale pod it read must not come back into the cache, where no
// further event would ever remove it and its memory would stay charged.
func TestRetriedBindDoesNotResurrectDeletedPod(t *testing.T) {
	tests := []struct {
		name         string
		bindTo       string
		deleteOnRead bool
		wantErr      bool
		wantInCache  bool
	}{
		{name: "deleted while the retried bind runs", bindTo: "n1", deleteOnRead: true},
		{name: "deleted, retried bind to another node", bindTo: "n4", deleteOnRead: true, wantErr: true},
		{name: "not deleted: the informer's Bound entry stays", bindTo: "n1", wantInCache: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger, ctx := ktesting.NewTestContext(t)
			nodes, _ := routeFixture()
			bound := st.MakePod().Name("p").GPUMem(4).Node("n1").Placement(`{"0":{"1":4}}`).Obj()
			ext, api := extenderOn(logger, nodes, []*v1.Pod{bound}) // the informer has seen it bound
			if tc.deleteOnRead {
				api.PrependReactor("get", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
					if err := api.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), "default", "p"); err != nil {
						return true, nil, err
					}
					ext.Cache().RemovePod(bound) // the informer's delete event
					return true, bound.DeepCopy(), nil
				})
			}
			err := ext.Bind(ctx, &extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "default", PodUID: "uid-p", Node: tc.bindTo})
			if (err != nil) != tc.wantErr {
				t.Errorf("Bind error = %v, want error %v", err, tc.wantErr)
			}
			_, inCache := ext.Cache().Pod("uid-p")
			if inCache != tc.wantInCache {
				t.Errorf("pod in cache = %v, want %v", inCache, tc.wantInCache)
			}
			n1, _ := ext.Cache().Node("n1")
			want := []int64{0, 0}
			if tc.wantInCache {
				want[1] = 4
			}
			if diff := cmp.Diff(want, []int64{n1.GPUs[0].Used, n1.GPUs[1].Used}); diff != "" {
				t.Errorf("n1 used per GPU (-want,+got):\n%s", diff)
			}
		})
	}
}
