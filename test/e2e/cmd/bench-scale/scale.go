package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// namespace holds the benchmark's pods.
const namespace = "scale"

// podUnits is each running pod's gpu-mem, in GiB.
const podUnits = 4

// scale fills one cluster and measures the extender on it.
type scale struct {
	o      options
	c      *framework.Cluster
	client kubernetes.Interface // faster than the cluster's own client, for filling
	nodes  []string
}

func newScale(c *framework.Cluster, o options) (*scale, error) {
	rc := c.RestConfigWithLimits(2000, 4000)
	rc.ContentType = "application/vnd.kubernetes.protobuf"
	client, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	return &scale{o: o, c: c, client: client}, nil
}

// measure fills the cluster, starts the extender and times it.
func (s *scale) measure(ctx context.Context, extenderBin string) (*report, error) {
	start := time.Now()
	if err := s.addNodes(ctx); err != nil {
		return nil, err
	}
	logf("%d nodes in %.1f s", s.o.nodes, time.Since(start).Seconds())
	start = time.Now()
	if err := s.addPods(ctx); err != nil {
		return nil, err
	}
	logf("%d running pods in %.1f s", s.o.pods, time.Since(start).Seconds())

	rep := &report{Nodes: s.o.nodes, Pods: s.o.pods}
	args, profileAddr, err := benchrun.ExtenderArgs(s.o.extenderArgs, s.o.profile != "")
	if err != nil {
		return nil, err
	}
	start = time.Now()
	ext, err := s.c.StartExtender(ctx, extenderBin, 0, args...)
	if err != nil {
		return nil, err
	}
	if err := framework.WaitFor(ctx, 20*time.Millisecond, "extender ready", func() (bool, error) {
		var ready map[string]string
		return ext.GetJSON(ctx, "/readyz", &ready) == nil, nil
	}); err != nil {
		return nil, err
	}
	rep.ReadyS = time.Since(start).Seconds()
	pid := ext.Proc.PID()
	if rep.RSSReadyMiB, err = rssMiB(pid, "VmRSS"); err != nil {
		return nil, err
	}
	var inv struct {
		Nodes []struct {
			Pods []json.RawMessage `json:"pods"`
		} `json:"nodes"`
	}
	if err := ext.GetJSON(ctx, framework.ExtenderPrefix+"/inspect", &inv); err != nil {
		return nil, err
	}
	s.heapProfile(ctx, profileAddr, "ready")
	pods := 0
	for _, n := range inv.Nodes {
		pods += len(n.Pods)
	}
	if len(inv.Nodes) != s.o.nodes || pods != s.o.pods {
		return nil, fmt.Errorf("ready extender holds %d nodes and %d pods, want %d and %d", len(inv.Nodes), pods, s.o.nodes, s.o.pods)
	}
	counts := []int{s.o.nodes}
	if s.o.nodes > 500 {
		counts = []int{500, s.o.nodes}
	}
	for _, candidates := range counts {
		l, err := s.filterLatency(ctx, ext, candidates)
		if err != nil {
			return nil, err
		}
		rep.Filter = append(rep.Filter, l)
		s.cpuProfile(ctx, ext, profileAddr, candidates)
	}
	for _, candidates := range counts {
		l, err := s.prioritizeLatency(ctx, ext, candidates)
		if err != nil {
			return nil, err
		}
		rep.Prioritize = append(rep.Prioritize, l)
	}
	s.heapProfile(ctx, profileAddr, "after-calls")
	if rep.RSSAfterMiB, err = rssMiB(pid, "VmRSS"); err != nil {
		return nil, err
	}
	// What an operator does on a cluster this size weighs on the peak too: a /metrics scrape
	// (every card's series) and the invariant check (the extender's audit, which lists every
	// pod, and its inspect answer).
	if _, err := ext.Metrics(ctx); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	inv2, err := s.c.CheckInvariants(ctx, namespace, ext)
	if err != nil {
		return nil, err
	}
	if !inv2.OK() {
		return nil, fmt.Errorf("invariant check failed: %s", inv2)
	}
	if rep.RSSPeakMiB, err = rssMiB(pid, "VmHWM"); err != nil {
		return nil, err
	}
	return rep, nil
}

// heapProfile writes the extender's heap profile to o.profile/heap-<when>.pprof when profiling.
func (s *scale) heapProfile(ctx context.Context, addr, when string) {
	if addr == "" {
		return
	}
	path := filepath.Join(s.o.profile, "heap-"+when+".pprof")
	if err := framework.SaveProfile(ctx, "http://"+addr+"/debug/pprof/heap?gc=1", path); err != nil {
		logf("heap profile: %v", err)
		return
	}
	logf("heap profile of the extender: %s", path)
}

// cpuProfile writes a 5 s CPU profile of the extender answering filter calls with candidates
// names (untimed, after the timed ones) to o.profile/cpu-<candidates>.pprof when profiling.
func (s *scale) cpuProfile(ctx context.Context, ext *framework.Extender, addr string, candidates int) {
	if addr == "" {
		return
	}
	path := filepath.Join(s.o.profile, fmt.Sprintf("cpu-%d.pprof", candidates))
	done := make(chan error, 1)
	go func() { done <- framework.SaveProfile(ctx, "http://"+addr+"/debug/pprof/profile?seconds=5", path) }()
	for {
		select {
		case err := <-done:
			if err != nil {
				logf("CPU profile: %v", err)
				return
			}
			logf("CPU profile of the extender, filter with %d candidates: %s", candidates, path)
			return
		default:
		}
		if _, err := s.filterLatency(ctx, ext, candidates); err != nil {
			logf("CPU profile: %v", err)
			return
		}
	}
}

// addNodes creates the nodes, 32 at a time.
func (s *scale) addNodes(ctx context.Context) error {
	s.nodes = make([]string, s.o.nodes)
	for i := range s.nodes {
		s.nodes[i] = fmt.Sprintf("node-%05d", i)
	}
	return benchrun.AddGPUNodes(ctx, s.c, s.nodes, 8, 16, 32)
}

// addPods creates the running pods, already bound: pod i runs on node i mod NODES, on card
// (i / NODES) mod 8, with the placement annotations the extender would have written.
func (s *scale) addPods(ctx context.Context) error {
	names := contract.DefaultNames()
	q := *resource.NewQuantity(podUnits, resource.DecimalSI)
	return benchrun.Parallel(s.o.pods, 32, func(i int) error {
		node, card := s.nodes[i%len(s.nodes)], (i/len(s.nodes))%8
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("run-%06d", i), Namespace: namespace, Annotations: map[string]string{
				contract.AnnotationAllocation: fmt.Sprintf(`{"0":{"%d":%d}}`, card, podUnits),
				contract.AnnotationIndex:      fmt.Sprint(card),
				contract.AnnotationAssigned:   "true",
			}},
			Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{names.Resource: q}}}}},
		}
		_, err := s.client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
		return err
	})
}

// filterLatency times o.calls filter calls of pending pods of 24 shapes (one per call, in
// turn) with candidates node names chosen at random, as kube-scheduler sends them.
func (s *scale) filterLatency(ctx context.Context, ext *framework.Extender, candidates int) (latency, error) {
	return s.verbLatency(ctx, ext, "/filter", pendingShapes(), candidates, func(pod *v1.Pod, body []byte) error {
		var res extenderv1.ExtenderFilterResult
		if err := json.Unmarshal(body, &res); err != nil {
			return err
		}
		if res.Error != "" || res.NodeNames == nil {
			return fmt.Errorf("filter of %s: %+v", pod.Name, res)
		}
		return nil
	})
}

// prioritizeLatency times o.calls prioritize calls of pending pods without gpu-mem, of 8
// shapes, with candidates node names chosen at random.
func (s *scale) prioritizeLatency(ctx context.Context, ext *framework.Extender, candidates int) (latency, error) {
	return s.verbLatency(ctx, ext, "/prioritize", plainShapes(), candidates, func(pod *v1.Pod, body []byte) error {
		var res extenderv1.HostPriorityList
		if err := json.Unmarshal(body, &res); err != nil {
			return err
		}
		if len(res) != candidates {
			return fmt.Errorf("prioritize of %s: %d scores for %d candidates", pod.Name, len(res), candidates)
		}
		return nil
	})
}

// verbLatency times o.calls calls of verb, for the shapes in turn, with candidates node names
// chosen at random, as kube-scheduler sends them; check reads each answer.
func (s *scale) verbLatency(ctx context.Context, ext *framework.Extender, verb string, shapes []*v1.Pod, candidates int,
	check func(pod *v1.Pod, answer []byte) error) (latency, error) {
	rng := rand.New(rand.NewPCG(uint64(candidates), 7)) //nolint:gosec // G115: a positive count
	bodies := make([][]byte, len(shapes))
	for i, pod := range shapes {
		names := make([]string, candidates)
		for j, k := range rng.Perm(len(s.nodes))[:candidates] {
			names[j] = s.nodes[k]
		}
		raw, err := json.Marshal(&extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names})
		if err != nil {
			return latency{}, err
		}
		bodies[i] = raw
	}
	times := make([]time.Duration, 0, s.o.calls)
	calls := make([]slowCall, 0, s.o.calls)
	for i := range s.o.calls {
		start := time.Now()
		var answer json.RawMessage
		if err := post(ctx, ext, verb, bodies[i%len(bodies)], &answer); err != nil {
			return latency{}, err
		}
		took := time.Since(start)
		times = append(times, took)
		calls = append(calls, slowCall{call: i, pod: shapes[i%len(shapes)].Name, took: took, bytes: len(answer)})
		if err := check(shapes[i%len(shapes)], answer); err != nil {
			return latency{}, err
		}
	}
	slices.SortStableFunc(calls, func(a, b slowCall) int { return cmp.Compare(b.took, a.took) })
	for _, c := range calls[:min(3, len(calls))] {
		logf("%s, %d candidates: call %d (%s) took %.2f ms, answer %d bytes", verb, candidates, c.call, c.pod, ms(c.took), c.bytes)
	}
	return latency{Candidates: candidates, P50Ms: ms(framework.Percentile(times, 0.5)), P99Ms: ms(framework.Percentile(times, 0.99))}, nil
}

// slowCall is one timed call, for the log of the slowest.
type slowCall struct {
	call  int
	pod   string
	took  time.Duration
	bytes int
}

// plainShapes are 8 pods without gpu-mem: 1-16 CPUs, 2-64 GiB of memory.
func plainShapes() []*v1.Pod {
	var out []*v1.Pod
	for _, cpu := range []int64{1, 2, 4, 16} {
		for _, gib := range []int64{2, 4 * cpu} {
			name := fmt.Sprintf("plain-%dcpu-%dgib", cpu, gib)
			out = append(out, &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("uid-" + name)},
				Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
					Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
						v1.ResourceCPU:    *resource.NewQuantity(cpu, resource.DecimalSI),
						v1.ResourceMemory: *resource.NewQuantity(gib<<30, resource.BinarySI)}}}}}})
		}
	}
	return out
}

// pendingShapes are 24 pods: 1-12 GiB on one card, and 2, 4 or 8 cards of 8-16 GiB.
func pendingShapes() []*v1.Pod {
	names := contract.DefaultNames()
	pod := func(name string, units int64, annotations map[string]string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, UID: types.UID("uid-" + name), Annotations: annotations},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
				Resources: v1.ResourceRequirements{Limits: v1.ResourceList{names.Resource: *resource.NewQuantity(units, resource.DecimalSI)}}}}}}
	}
	var out []*v1.Pod
	for u := int64(1); u <= 12; u++ {
		out = append(out, pod(fmt.Sprintf("one-%d", u), u, nil))
	}
	for _, gpus := range []int64{2, 4, 8} {
		for _, per := range []int64{8, 10, 12, 16} {
			out = append(out, pod(fmt.Sprintf("multi-%d-%d", gpus, per), gpus*per,
				map[string]string{contract.DefaultGPUsPerContainer: fmt.Sprint(gpus)}))
		}
	}
	return out
}

// post sends body to the extender's verb and decodes its answer into v.
func post(ctx context.Context, ext *framework.Extender, verb string, body []byte, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ext.URL()+framework.ExtenderPrefix+verb, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := ext.Client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s: %d %s", verb, resp.StatusCode, raw)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func rssMiB(pid int, field string) (float64, error) {
	kib, err := framework.MemoryKiB(pid, field)
	return float64(kib) / 1024, err
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
