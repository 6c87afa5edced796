package feed

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// podListWatch lists pods for the feed's reflector page by page, handing each page to the feed
// as it arrives, and watches them. client-go's reflector holds a whole first list before its
// store sees any of it, streamed (watch-list) or paged: at 50,000 pods that peak is most of the
// extender's memory (`make bench-scale`). Here a page is garbage once the feed has it.
type podListWatch struct {
	feed *PodFeed
	pods corev1client.PodInterface
}

var (
	_ toolscache.ListerWatcher            = (*podListWatch)(nil)
	_ toolscache.ListerWatcherWithContext = (*podListWatch)(nil)
)

// ListWatch lists and watches every pod through client for Run. Its list hands the pods to the
// feed page by page and returns none itself; the reflector's Replace that follows completes it
// (pods the feed held and the list did not have are removed).
func (f *PodFeed) ListWatch(client kubernetes.Interface) toolscache.ListerWatcher {
	return &podListWatch{feed: f, pods: client.CoreV1().Pods(metav1.NamespaceAll)}
}

// IsWatchListSemanticsUnSupported makes the reflector list rather than stream its first list
// (client-go's watchlist.DoesClientNotSupportWatchListSemantics): a streamed list is held whole
// until its end.
func (lw *podListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// ListWithContext reads every pod at the newest resource version, page by page
// (EachPodPage), and hands each page to the feed. The reflector's resource version is
// ignored: the newest is at least as new as any it asks for, and its "0" (the API server's
// watch cache) would answer in one piece. It returns an empty list carrying the resource
// version the watch continues from.
func (lw *podListWatch) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	lw.feed.beginList()
	rv, err := EachPodPage(ctx, lw.pods, opts, func(pods []v1.Pod) error {
		for i := range pods {
			pod := new(v1.Pod)
			*pod = pods[i] // a pod the feed keeps must not hold the page's array
			if err := lw.feed.addListed(pod); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list pods: %w", err)
	}
	return &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}, nil
}

// WatchWithContext watches every pod from opts' resource version.
func (lw *podListWatch) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	return lw.pods.Watch(ctx, opts)
}

// List is ListWithContext without a context, for client-go's ListerWatcher (the reflector
// calls ListWithContext).
func (lw *podListWatch) List(opts metav1.ListOptions) (runtime.Object, error) {
	return lw.ListWithContext(context.Background(), opts)
}

// Watch is WatchWithContext without a context, for client-go's ListerWatcher.
func (lw *podListWatch) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return lw.WatchWithContext(context.Background(), opts)
}

// beginList starts a list: the keys it hands over are collected for the Replace that ends it.
func (f *PodFeed) beginList() {
	f.mu.Lock()
	f.listed = map[string]bool{}
	f.mu.Unlock()
}

// addListed hands one listed pod to the cache and records its key for Replace.
func (f *PodFeed) addListed(pod *v1.Pod) error {
	if err := f.set(pod); err != nil {
		return err
	}
	f.mu.Lock()
	if f.listed != nil {
		f.listed[podKey(pod)] = true
	}
	f.mu.Unlock()
	return nil
}
