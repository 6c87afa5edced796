package scheduler

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
)

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
