package scheduler

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// TestEvictAsksOnce: an eviction goes to the pods/eviction subresource of the core API, and a
// PodDisruptionBudget's refusal (429 with Retry-After: 10) comes back at once instead of being
// waited out and retried by client-go.
func TestEvictAsksOnce(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Retry-After", "10")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"Cannot evict pod as it would violate the pod's disruption budget.","reason":"TooManyRequests","code":429}`))
	}))
	defer srv.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	logger, ctx := ktesting.NewTestContext(t)
	e := NewExtender(cache.New(contract.DefaultNames(), logger), client, placement.Binpack{}, contract.DefaultNames())
	start := time.Now()
	err = e.evict(ctx, &placement.PodInfo{Namespace: "default", Name: "victim", UID: "uid-victim"}, true)
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("evict() = %v, want the 429", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("evict() took %v: the 429 was waited out", took)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) != 1 || paths[0] != "POST /api/v1/namespaces/default/pods/victim/eviction" {
		t.Errorf("requests %v, want one POST /api/v1/namespaces/default/pods/victim/eviction", paths)
	}
}
