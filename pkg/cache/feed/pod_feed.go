package feed

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
)

// PodFeed is the store of the extender's pod reflector: it hands every pod event to a Cache in
// order and keeps, of the pods themselves, only what the extender reads back. A pod not bound
// yet is kept whole (trimmed as Trimmer trims it), since Bind reads it (Lister); a bound pod is kept as its key and UID only, which is all a later
// delete needs, since the cache holds what it charges. A shared informer would keep every
// pod's object: at 50,000 pods that is most of the extender's memory (`make bench-scale`).
//
// It implements client-go's Store for a Reflector (see Run); the reflector calls it from one
// goroutine, in event order. List, ListKeys, Get and GetByKey answer for the pending pods
// only. Safe for concurrent use.
type PodFeed struct {
	cache cache.Cache
	keep  map[string]bool // annotations a bound pod keeps (Trimmer's)

	mu      sync.RWMutex
	pending map[string]map[string]*v1.Pod // namespace → name → trimmed pod not bound yet
	bound   map[string]types.UID          // key → UID of a bound pod
	listed  map[string]bool               // keys handed over by the list in progress (ListWatch)
	synced  atomic.Bool                   // the first list has been handed to the cache
	lastRV  atomic.Pointer[string]        // the latest resource version seen
}

var (
	_ toolscache.Store               = (*PodFeed)(nil)
	_ corelisters.PodLister          = podLister{}
	_ corelisters.PodNamespaceLister = podNamespaceLister{}
)

// NewPodFeed returns a feed for c; names says which annotations bound pods keep.
func NewPodFeed(c cache.Cache, names contract.Names) *PodFeed {
	return &PodFeed{cache: c, keep: keptAnnotations(names), pending: map[string]map[string]*v1.Pod{},
		bound: map[string]types.UID{}}
}

// Run lists and watches pods through lw into the feed until ctx ends, relisting after errors
// as client-go's Reflector does.
func (f *PodFeed) Run(ctx context.Context, lw toolscache.ListerWatcher) {
	r := toolscache.NewReflectorWithOptions(lw, &v1.Pod{}, f, toolscache.ReflectorOptions{Name: "gpushare-pods"})
	r.RunWithContext(ctx)
}

// HasSynced reports whether every pod of the first list has been handed to the cache.
func (f *PodFeed) HasSynced() bool { return f.synced.Load() }

// Add hands a new pod to the cache.
func (f *PodFeed) Add(obj any) error { return f.set(obj) }

// Update hands a changed pod to the cache.
func (f *PodFeed) Update(obj any) error { return f.set(obj) }

// Delete tells the cache a pod is gone.
func (f *PodFeed) Delete(obj any) error {
	pod, ok := untombstone(obj).(*v1.Pod)
	if !ok {
		return fmt.Errorf("pod feed: delete of %T", obj)
	}
	key := podKey(pod)
	f.mu.Lock()
	f.forgetLocked(key)
	f.mu.Unlock()
	f.cache.RemovePod(pod)
	f.Bookmark(pod.ResourceVersion)
	return nil
}

// Replace makes the feed, and the cache, hold exactly list and the pods the feed's own list
// handed over page by page (ListWatch): pods in neither are removed.
func (f *PodFeed) Replace(list []any, rv string) error {
	f.mu.Lock()
	seen := f.listed
	f.listed = nil
	f.mu.Unlock()
	if seen == nil {
		seen = make(map[string]bool, len(list))
	}
	for _, obj := range list {
		pod, ok := obj.(*v1.Pod)
		if !ok {
			return fmt.Errorf("pod feed: replace with %T", obj)
		}
		seen[podKey(pod)] = true
		if err := f.set(pod); err != nil {
			return err
		}
	}
	var gone []*v1.Pod
	f.mu.Lock()
	for key, uid := range f.bound {
		if !seen[key] {
			gone = append(gone, stub(key, uid))
			f.forgetLocked(key)
		}
	}
	for _, ns := range f.pending {
		for _, pod := range ns {
			if key := podKey(pod); !seen[key] {
				gone = append(gone, pod)
				f.forgetLocked(key)
			}
		}
	}
	f.mu.Unlock()
	for _, pod := range gone {
		f.cache.RemovePod(pod)
	}
	f.Bookmark(rv)
	f.synced.Store(true)
	return nil
}

// Bookmark records a resource version the watch has reached.
func (f *PodFeed) Bookmark(rv string) { f.lastRV.Store(&rv) }

// LastStoreSyncResourceVersion is the latest resource version the feed has seen.
func (f *PodFeed) LastStoreSyncResourceVersion() string {
	if rv := f.lastRV.Load(); rv != nil {
		return *rv
	}
	return ""
}

// Resync does nothing: the feed has no handlers to replay to.
func (f *PodFeed) Resync() error { return nil }

// set records pod and hands it to the cache. A pod recreated under the same name (another
// UID) first removes the old one from the cache.
func (f *PodFeed) set(obj any) error {
	pod, ok := obj.(*v1.Pod)
	if !ok {
		return fmt.Errorf("pod feed: %T is not a pod", obj)
	}
	trimPod(pod, f.keep)
	key := podKey(pod)
	f.mu.Lock()
	old, had := f.uidLocked(key)
	f.forgetLocked(key)
	if pod.Spec.NodeName == "" {
		ns := f.pending[pod.Namespace]
		if ns == nil {
			ns = map[string]*v1.Pod{}
			f.pending[pod.Namespace] = ns
		}
		ns[pod.Name] = pod
	} else {
		f.bound[key] = pod.UID
	}
	f.mu.Unlock()
	if had && old != pod.UID {
		f.cache.RemovePod(stub(key, old))
	}
	f.cache.SetPod(pod)
	if pod.ResourceVersion != "" {
		f.Bookmark(pod.ResourceVersion)
	}
	return nil
}

// uidLocked is the UID the feed holds for key.
func (f *PodFeed) uidLocked(key string) (types.UID, bool) {
	if uid, ok := f.bound[key]; ok {
		return uid, true
	}
	if p := f.pendingLocked(key); p != nil {
		return p.UID, true
	}
	return "", false
}

// forgetLocked drops key from the feed.
func (f *PodFeed) forgetLocked(key string) {
	delete(f.bound, key)
	namespace, name, _ := cutKey(key)
	if ns := f.pending[namespace]; ns != nil {
		delete(ns, name)
		if len(ns) == 0 {
			delete(f.pending, namespace)
		}
	}
}

// pendingLocked is the pending pod with key, nil if none.
func (f *PodFeed) pendingLocked(key string) *v1.Pod {
	namespace, name, _ := cutKey(key)
	return f.pending[namespace][name]
}

// List returns the pending pods. They must not be modified.
func (f *PodFeed) List() []any {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []any
	for _, ns := range f.pending {
		for _, p := range ns {
			out = append(out, p)
		}
	}
	return out
}

// ListKeys returns the keys of the pending pods.
func (f *PodFeed) ListKeys() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []string
	for _, ns := range f.pending {
		for _, p := range ns {
			out = append(out, podKey(p))
		}
	}
	return out
}

// Get returns the pending pod with obj's key.
func (f *PodFeed) Get(obj any) (any, bool, error) {
	key, err := toolscache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		return nil, false, err
	}
	return f.GetByKey(key)
}

// GetByKey returns the pending pod namespace/name.
func (f *PodFeed) GetByKey(key string) (any, bool, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if p := f.pendingLocked(key); p != nil {
		return p, true, nil
	}
	return nil, false, nil
}

// Lister lists and gets the pending pods; a bound pod is not found (read it from the API
// server). The pods must not be modified.
func (f *PodFeed) Lister() corelisters.PodLister { return podLister{f} }

// podLister is PodFeed's corelisters.PodLister.
type podLister struct{ f *PodFeed }

// List returns the pending pods that match selector.
func (l podLister) List(selector labels.Selector) ([]*v1.Pod, error) {
	return podNamespaceLister{f: l.f}.List(selector)
}

// Pods lists and gets the pending pods of one namespace.
func (l podLister) Pods(namespace string) corelisters.PodNamespaceLister {
	return podNamespaceLister{f: l.f, namespace: namespace}
}

// podNamespaceLister answers for the pending pods of one namespace ("" for all).
type podNamespaceLister struct {
	f         *PodFeed
	namespace string
}

// List returns the namespace's pending pods that match selector.
func (l podNamespaceLister) List(selector labels.Selector) ([]*v1.Pod, error) {
	l.f.mu.RLock()
	defer l.f.mu.RUnlock()
	var out []*v1.Pod
	for namespace, ns := range l.f.pending {
		if l.namespace != "" && namespace != l.namespace {
			continue
		}
		for _, p := range ns {
			if selector.Matches(labels.Set(p.Labels)) {
				out = append(out, p)
			}
		}
	}
	return out, nil
}

// Get returns the namespace's pending pod name, or a NotFound error (also for a bound pod:
// the caller reads it from the API server).
func (l podNamespaceLister) Get(name string) (*v1.Pod, error) {
	l.f.mu.RLock()
	defer l.f.mu.RUnlock()
	if p, ok := l.f.pending[l.namespace][name]; ok {
		return p, nil
	}
	return nil, apierrors.NewNotFound(v1.Resource("pods"), name)
}

// podKey is namespace/name.
func podKey(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// stub is a pod with only the identity RemovePod needs.
func stub(key string, uid types.UID) *v1.Pod {
	p := &v1.Pod{}
	p.Namespace, p.Name, _ = cutKey(key)
	p.UID = uid
	return p
}

func cutKey(key string) (string, string, bool) {
	ns, name, err := toolscache.SplitMetaNamespaceKey(key)
	return ns, name, err == nil
}
