package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement/policies"
)

// benchSizes are the cluster sizes of the benchmarks, in nodes of benchGPUsPerNode cards.
var benchSizes = []int{100, 1000, 5000}

// benchPolicies are the policies prioritize is measured with: the cheapest and the default.
var benchPolicies = []string{"binpack", policies.Default}

const (
	benchGPUsPerNode = 8
	benchPodUnits    = 4
)

// benchCluster is a cluster of n nodes of 8 cards each, a seeded mix of 16, 32 and 80 GiB
// nodes, each card 0-90% used by one bound pod; plus the pending 4 GiB pod to place.
type benchCluster struct {
	ext   *Extender
	api   *fake.Clientset
	ctx   context.Context
	nodes []string
	args  *extenderv1.ExtenderArgs
}

func newBenchCluster(b *testing.B, n int, policyName string, opts ...Option) *benchCluster {
	b.Helper()
	rng := rand.New(rand.NewPCG(uint64(n), 42)) //nolint:gosec // G115: n is a positive cluster size
	c := cache.New(contract.DefaultNames(), klog.Background())
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("node-%05d", i)
		size := []int64{16, 32, 80}[rng.IntN(3)]
		sizes := make([]int64, benchGPUsPerNode)
		for g := range sizes {
			sizes[g] = size
		}
		c.SetNode(st.MakeNode(names[i]).GPUs(sizes...).Obj())
		for g := range sizes {
			used := int64(float64(size) * 0.9 * rng.Float64())
			if used == 0 {
				continue
			}
			c.SetPod(st.MakePod().Name(fmt.Sprintf("%s-g%d", names[i], g)).GPUMem(used).Node(names[i]).
				Placement(fmt.Sprintf(`{"0":{"%d":%d}}`, g, used)).Obj())
		}
	}
	api := fakeAPIWithBinding()
	pod := st.MakePod().Name("pending").GPUMem(benchPodUnits).Obj()
	ctx := klog.NewContext(context.Background(), klog.Background())
	nodeNames := append([]string(nil), names...)
	policy, err := policies.NewRegistry().New(policyName)
	if err != nil {
		b.Fatal(err)
	}
	ext := NewExtender(c, api, policy, contract.DefaultNames(), opts...)
	ext.Relearn() // a learning policy starts from the pods running, as after a restart
	return &benchCluster{
		ext:   ext,
		api:   api,
		ctx:   ctx,
		nodes: names,
		args:  &extenderv1.ExtenderArgs{Pod: pod, NodeNames: &nodeNames},
	}
}

func BenchmarkFilter(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			bc := newBenchCluster(b, n, policies.Default)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if res := bc.ext.Filter(bc.ctx, bc.args); res.Error != "" || len(*res.NodeNames) == 0 {
					b.Fatalf("filter: %q, %d nodes passed", res.Error, len(*res.NodeNames))
				}
			}
		})
	}
}

func BenchmarkPrioritize(b *testing.B) {
	for _, policy := range benchPolicies {
		for _, n := range benchSizes {
			b.Run(fmt.Sprintf("policy=%s/nodes=%d", policy, n), func(b *testing.B) {
				bc := newBenchCluster(b, n, policy)
				b.ReportAllocs()
				b.ResetTimer()
				for range b.N {
					if _, err := bc.ext.Prioritize(bc.ctx, bc.args); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkFilterPrioritize is one scheduling cycle's extender work: filter all nodes, then
// prioritize those that passed, as kube-scheduler does. pods=same schedules the same 4 GiB pod
// every cycle (a ReplicaSet's burst: a learning policy reuses each node's results from the
// previous cycle); pods=mixed cycles through pods of other sizes and CPU requests, so that no
// cycle can reuse the previous one's results.
func BenchmarkFilterPrioritize(b *testing.B) {
	mixed := []*v1.Pod{}
	for i, units := range []int64{1, 2, 4, 6, 8, 12, 16} {
		mixed = append(mixed, st.MakePod().Name(fmt.Sprintf("mixed-%d", i)).GPUMem(units).CPU(500*int64(1+i), 1<<30).Obj())
	}
	for _, policy := range benchPolicies {
		for _, pods := range []string{"same", "mixed"} {
			for _, n := range benchSizes {
				b.Run(fmt.Sprintf("policy=%s/pods=%s/nodes=%d", policy, pods, n), func(b *testing.B) {
					bc := newBenchCluster(b, n, policy)
					b.ReportAllocs()
					b.ResetTimer()
					for i := range b.N {
						pod := bc.args.Pod
						if pods == "mixed" {
							pod = mixed[i%len(mixed)]
						}
						res := bc.ext.Filter(bc.ctx, &extenderv1.ExtenderArgs{Pod: pod, NodeNames: bc.args.NodeNames})
						if _, err := bc.ext.Prioritize(bc.ctx, &extenderv1.ExtenderArgs{Pod: pod, NodeNames: res.NodeNames}); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
}

// BenchmarkBind binds a new 4 GiB pod per iteration, round robin over the nodes it fits, through the
// fake API (get, patch, binding). Creating the pod beforehand and releasing it afterwards are
// not timed.
func BenchmarkBind(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			bc := newBenchCluster(b, n, policies.Default)
			pods := bc.api.CoreV1().Pods("default")
			fits := *bc.ext.Filter(bc.ctx, bc.args).NodeNames
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				pod := st.MakePod().Name(fmt.Sprintf("bench-%d", i)).GPUMem(benchPodUnits).Obj()
				if _, err := pods.Create(bc.ctx, pod, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
				args := &extenderv1.ExtenderBindingArgs{PodName: pod.Name, PodNamespace: pod.Namespace, PodUID: pod.UID, Node: fits[i%len(fits)]}
				b.StartTimer()
				err := bc.ext.Bind(bc.ctx, args)
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				releaseBenchPod(b, bc, pod)
				b.StartTimer()
			}
		})
	}
}

// releaseBenchPod deletes a bound pod from the API and the cache, so the cluster's occupancy
// stays as it was.
func releaseBenchPod(b *testing.B, bc *benchCluster, pod *v1.Pod) {
	if err := bc.api.CoreV1().Pods(pod.Namespace).Delete(bc.ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}
	bc.ext.Cache().RemovePod(pod)
	bc.api.ClearActions()
}

// BenchmarkHTTPFilterPrioritize is BenchmarkFilterPrioritize (binpack, the same pod) through the
// extender's HTTP handler, in process: the extender's share of what kube-scheduler waits for,
// decoding the requests and encoding the answers as JSON included, the network and
// kube-scheduler's own encoding and decoding not.
func BenchmarkHTTPFilterPrioritize(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) {
			bc := newBenchCluster(b, n, "binpack")
			h := NewHandler(bc.ext, func() bool { return true }, HandlerConfig{MaxBody: 64 << 20}, klog.Background())
			post := poster(b, h)
			filterBody, err := json.Marshal(bc.args)
			if err != nil {
				b.Fatal(err)
			}
			var res extenderv1.ExtenderFilterResult
			if err := json.Unmarshal(post("/filter", filterBody), &res); err != nil || res.NodeNames == nil {
				b.Fatalf("filter answer: %v", err)
			}
			prioBody, err := json.Marshal(&extenderv1.ExtenderArgs{Pod: bc.args.Pod, NodeNames: res.NodeNames})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				post("/filter", filterBody)
				post("/prioritize", prioBody)
			}
		})
	}
}

// BenchmarkHTTPFilterPrioritizeLatency is one kube-scheduler cycle through the HTTP handler,
// JSON both ways: with the extender's default --filter-chooses-node, filter alone (it scores and
// answers one node, which kube-scheduler binds without scoring); without it, filter, then
// prioritize of the nodes that passed. At 5,000 nodes of 8 cards
// with a bound pod on most cards, for 500 and 5,000 candidate names, with the default policy
// (fgd-online) and a pod of another shape every cycle (24 shapes: 1-12 units on one card, 2-8
// cards of 8-16 units), so that no cycle reuses the previous pod's memo. It reports the p50
// and p99 of a cycle's time.
func BenchmarkHTTPFilterPrioritizeLatency(b *testing.B) {
	const nodes = 5000
	bc := newBenchCluster(b, nodes, policies.Default)
	h := NewHandler(bc.ext, func() bool { return true }, HandlerConfig{MaxBody: 64 << 20}, klog.Background())
	post := poster(b, h)
	var shapes []*v1.Pod
	for u := int64(1); u <= 12; u++ {
		shapes = append(shapes, st.MakePod().Name(fmt.Sprintf("one-%d", u)).GPUMem(u).Obj())
	}
	for i, gpus := range []int{2, 4, 8} {
		for _, per := range []int64{8, 10, 12, 16} {
			shapes = append(shapes, st.MakePod().Name(fmt.Sprintf("multi-%d-%d", i, per)).GPUMem(per*int64(gpus)).
				Annotation(contract.DefaultGPUsPerContainer, fmt.Sprint(gpus)).Obj())
		}
	}
	for _, cycle := range []string{"filter-chooses", "filter+prioritize"} {
		for _, candidates := range []int{500, nodes} {
			b.Run(fmt.Sprintf("cycle=%s/policy=%s/nodes=%d/candidates=%d", cycle, policies.Default, nodes, candidates), func(b *testing.B) {
				bc.ext.filterChooses = cycle == "filter-chooses"
				rng := rand.New(rand.NewPCG(uint64(candidates), 7)) //nolint:gosec // G115: a positive count
				bodies := make([][]byte, len(shapes))
				for i, pod := range shapes {
					names := make([]string, candidates)
					for j, k := range rng.Perm(nodes)[:candidates] {
						names[j] = bc.nodes[k]
					}
					raw, err := json.Marshal(&extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names})
					if err != nil {
						b.Fatal(err)
					}
					bodies[i] = raw
				}
				times := make([]time.Duration, 0, b.N)
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					start := time.Now()
					var res extenderv1.ExtenderFilterResult
					if err := json.Unmarshal(post("/filter", bodies[i%len(bodies)]), &res); err != nil || res.NodeNames == nil {
						b.Fatalf("filter answer: %v", err)
					}
					if bc.ext.filterChooses { // kube-scheduler binds the one node without scoring
						times = append(times, time.Since(start))
						continue
					}
					prio, err := json.Marshal(&extenderv1.ExtenderArgs{Pod: shapes[i%len(shapes)], NodeNames: res.NodeNames})
					if err != nil {
						b.Fatal(err)
					}
					post("/prioritize", prio)
					times = append(times, time.Since(start))
				}
				b.StopTimer()
				slices.Sort(times)
				b.ReportMetric(float64(times[len(times)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(times[len(times)*99/100].Microseconds())/1000, "p99-ms")
			})
		}
	}
}

// BenchmarkHTTPFilterUnfit is a default cycle (--filter-chooses-node) through the HTTP handler
// for a pod that fits none of the candidates (more memory than any card has): the answer then
// names every candidate with its reason, the largest answer filter writes. Preemption is off,
// so that only the filter pass and the wire are measured.
func BenchmarkHTTPFilterUnfit(b *testing.B) {
	const nodes = 5000
	bc := newBenchCluster(b, nodes, policies.Default, WithFilterChoosing(true), WithPreemption(false))
	h := NewHandler(bc.ext, func() bool { return true }, HandlerConfig{MaxBody: 64 << 20}, klog.Background())
	post := poster(b, h)
	pod := st.MakePod().Name("unfit").GPUMem(100).Obj()
	for _, candidates := range []int{500, nodes} {
		b.Run(fmt.Sprintf("nodes=%d/candidates=%d", nodes, candidates), func(b *testing.B) {
			names := bc.nodes[:candidates]
			body, err := json.Marshal(&extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				post("/filter", body)
			}
		})
	}
}

// poster POSTs a body to one of h's routes and returns the answer, failing b unless it is 200.
func poster(b *testing.B, h http.Handler) func(path string, body []byte) []byte {
	return func(path string, body []byte) []byte {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Prefix+path, bytes.NewReader(body)))
		if rec.Code != http.StatusOK {
			b.Fatalf("%s: %d %s", path, rec.Code, rec.Body)
		}
		return rec.Body.Bytes()
	}
}
