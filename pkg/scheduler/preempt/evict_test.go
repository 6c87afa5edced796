package preempt

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// TestEvictAsksOnce: the dry-run eviction goes to the pods/eviction subresource of the core API
// as a dry run (in the query, which admission sees, and in the body) with the victim's UID as
// precondition, and a PodDisruptionBudget's refusal (429
// with Retry-After: 10) comes back at once instead of being waited out and retried by
// client-go.
func TestEvictAsksOnce(t *testing.T) {
	var mu sync.Mutex
	var paths []string
	var sent policyv1.Eviction
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
		_ = json.NewDecoder(r.Body).Decode(&sent)
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
	_, ctx := ktesting.NewTestContext(t)
	p := New(Config{Enabled: true, Client: client, Names: contract.DefaultNames()})
	start := time.Now()
	err = p.dryRunEvict(ctx, &placement.PodInfo{Namespace: "default", Name: "victim", UID: "uid-victim"})
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("dryRunEvict() = %v, want the 429", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("dryRunEvict() took %v: the 429 was waited out", took)
	}
	mu.Lock()
	defer mu.Unlock()
	// the dry run in the query too: admission sees request.dryRun only there
	if want := "POST /api/v1/namespaces/default/pods/victim/eviction?dryRun=All"; len(paths) != 1 || paths[0] != want {
		t.Errorf("requests %v, want one %s", paths, want)
	}
	want := &metav1.DeleteOptions{Preconditions: metav1.NewUIDPreconditions("uid-victim"), DryRun: []string{metav1.DryRunAll}}
	if diff := cmp.Diff(want, sent.DeleteOptions); diff != "" {
		t.Errorf("the Eviction's deleteOptions (-want,+got):\n%s", diff)
	}
}
