package cache_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
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

// TestAddEventHandlersSyncedMeansDelivered: when every function AddEventHandlers returns says
// synced, the cache has received every pod of the first list, not merely the informer's store
// (the extender answers once they say so; a cache short of pods sees used cards as free).
func TestAddEventHandlersSyncedMeansDelivered(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	const n = 2000
	objs := []runtime.Object{st.MakeNode("gpu").GPUs(16, 16).Obj()}
	for i := range n {
		objs = append(objs, st.MakePod().Name(fmt.Sprintf("p%04d", i)).GPUMem(1).Node("gpu").
			Placement(fmt.Sprintf(`{"0":{"%d":1}}`, i%2)).Obj())
	}
	c := &slowCache{Cache: cache.New(contract.DefaultNames(), logger)}
	factory := informers.NewSharedInformerFactory(fake.NewClientset(objs...), 0)
	synced, err := cache.AddEventHandlers(c, factory, contract.DefaultNames())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
		t.Fatal("never synced")
	}
	if got := c.pods.Load(); got != n {
		t.Errorf("synced with %d of %d pods handed to the cache", got, n)
	}
	if _, ok := c.Node("gpu"); !ok {
		t.Error("synced without the node")
	}
}
