package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// namespace holds the benchmark's pods.
const namespace = "bench"

// The modes compared.
const (
	modeAlone    = "scheduler-only"
	modeExtender = "extender"
)

// mode is one way of scheduling: kube-scheduler with config alone, or with the extender binary
// and the shipped configuration.
type mode struct {
	name     string
	config   string
	extender string
}

// measure runs each mode o.runs times, each run on a fresh cluster, in turn.
func measure(ctx context.Context, env *benchrun.Env, o options) (benchrun.Report, error) {
	alone := filepath.Join(env.Dir, "scheduler-only.yaml")
	if err := os.WriteFile(alone, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"), 0o644); err != nil {
		return nil, err
	}
	if o.dra && o.SchedulerConfig == "" {
		o.SchedulerConfig = filepath.Join(env.Root, draSchedulerConfigFile)
	}
	rep := &report{DRA: o.dra, Nodes: o.nodes, Pods: o.pods, Replicas: o.replicas, Front: o.frontUsed(), Fence: o.fence}
	for i := range o.runs {
		for _, m := range o.modes(alone, env.Extender) {
			opts := env.ClusterOptions(fmt.Sprintf("%s-%d", m.name, i+1))
			opts.SchedulerConfig, opts.SchedulerQPS, opts.SchedulerBurst = m.config, o.schedulerQPS, o.schedulerBurst
			b := &bench{o: o, mode: m, opts: opts}
			res, err := b.run(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s run %d: %w", m.name, i+1, err)
			}
			logf("%s run %d: %s", m.name, i+1, res)
			rep.add(res)
		}
	}
	return benchrun.ReportFunc(func(w io.Writer) error { return rep.write(w, o) }), nil
}

// bench is one run of one mode on a fresh control plane.
type bench struct {
	o    options
	mode mode
	opts framework.Options
	c    *framework.Cluster
	// exts are the extender's replicas (none alone), named by names; ext is the first.
	exts  []*framework.Extender
	names []string
	ext   *framework.Extender
	// conns, with the connection front, says how many connections each replica received.
	conns func() []int
	// frontOrder is the replicas in the order the front has them (conns' order).
	frontOrder []*framework.Extender
	// args are each replica's flags (exts' order).
	args [][]string
	// fenceKubeconfig acts as the extender's service account (--fence).
	fenceKubeconfig string
	// draShapes, with --dra, are the pods' claim forms by size (nil without --dra).
	draShapes *draShapes

	mu      sync.Mutex
	created map[string]time.Time
	bound   map[string]time.Duration
}

// result is what one run measured.
type result struct {
	Mode         string  `json:"mode"`
	PodsPerS     float64 `json:"pods_per_s"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	BindFailures int     `json:"bind_failures"`
	// Replicas are the extender's replicas' own counts (extender runs only).
	Replicas []replicaStats `json:"replicas,omitempty"`
	// bound counts the pods bound; fewer than the pods created means the run stalled.
	bound         int
	stalled       bool
	overcommitted int
	// cpu is the CPU time each process used from the first pod created to the last bound
	// ("bench" is this program: creating the pods and watching them).
	cpu map[string]time.Duration
}

func (r result) String() string {
	s := fmt.Sprintf("%d bound, %.1f pods/s, create→bound p50 %.0f ms p99 %.0f ms, %d bind failures, %d cards over capacity",
		r.bound, r.PodsPerS, r.P50Ms, r.P99Ms, r.BindFailures, r.overcommitted)
	if r.stalled {
		s += ", STALLED"
	}
	return s
}

// run sets the cluster up, creates the pods and measures until they are bound or the run stalls.
func (b *bench) run(ctx context.Context) (result, error) {
	c, err := benchrun.StartCluster(ctx, b.opts, namespace)
	if err != nil {
		return result{}, err
	}
	b.c = c
	defer c.Stop()
	profileAddrs, closeFront, err := b.setUp(ctx)
	defer closeFront()
	if err != nil {
		return result{}, err
	}
	b.created, b.bound = map[string]time.Time{}, map[string]time.Duration{}
	ictx, stopInformer := context.WithCancel(ctx)
	defer stopInformer()
	if err := benchrun.WatchPods(ictx, c.Client, namespace, b.observe); err != nil {
		return result{}, err
	}
	return b.burst(ctx, profileAddrs)
}

// setUp starts kube-controller-manager (with --dra), the extender's replicas (in the
// extender's mode), kube-scheduler and the nodes, converts the pods' sizes (with --dra), and
// hands the leadership over with --handover. It returns each replica's profiling address and
// what closes the front, which the caller calls even on an error.
func (b *bench) setUp(ctx context.Context) ([]string, func(), error) {
	host, closeFront := "127.0.0.1:1", func() {} // kube-scheduler alone: no extender in its configuration
	var profileAddrs []string
	if b.o.dra {
		if err := b.startDRA(ctx); err != nil {
			return nil, closeFront, err
		}
	}
	if b.mode.extender != "" {
		var err error
		if host, profileAddrs, closeFront, err = b.startExtenders(ctx); err != nil {
			return nil, closeFront, err
		}
	}
	if err := b.c.StartScheduler(host); err != nil {
		return nil, closeFront, err
	}
	if err := b.prepareDRAPods(ctx); err != nil {
		return nil, closeFront, err
	}
	if err := b.addNodes(ctx); err != nil {
		return nil, closeFront, err
	}
	if b.o.handover && len(b.exts) > 1 {
		if err := b.handOver(ctx); err != nil {
			return nil, closeFront, err
		}
	}
	return profileAddrs, closeFront, nil
}

// burst creates the pods, waits until they are bound or the run stalls, and measures the run:
// its rate and latencies, the CPU each process used and what went wrong.
func (b *bench) burst(ctx context.Context, profileAddrs []string) (result, error) {
	cpuBefore := b.cpuTimes()
	reqBefore := b.apiRequests(ctx)
	for i, addr := range profileAddrs {
		go b.profile(ctx, b.names[i], addr)
	}
	if b.o.profile != "" {
		go b.profileAPIServer(ctx)
	}
	creator, err := b.creator()
	if err != nil {
		return result{}, err
	}
	start := time.Now()
	if err := b.createPods(ctx, creator); err != nil {
		return result{}, err
	}
	res := result{Mode: b.mode.name}
	res.bound, res.stalled = b.waitBound(ctx)
	elapsed := time.Since(start)
	res.cpu = b.cpuTimes()
	for name, d := range cpuBefore {
		res.cpu[name] -= d
	}
	lat := b.latencies()
	logf("%s run: the slowest 1%% of pods by the second they were created in: %s", b.mode.name, b.tail(start))
	for i, ext := range b.exts {
		b.logHandlerTimes(ctx, b.names[i], ext)
	}
	b.logAPIRequests(ctx, reqBefore)
	res.PodsPerS = float64(res.bound) / elapsed.Seconds()
	res.P50Ms, res.P99Ms = ms(framework.Percentile(lat, 0.5)), ms(framework.Percentile(lat, 0.99))
	err = b.tally(ctx, &res)
	return res, err
}

// tally adds to res what the run got wrong: kube-scheduler's bind failures, each replica's
// counts and the cards over capacity.
func (b *bench) tally(ctx context.Context, res *result) error {
	var err error
	if res.BindFailures, err = b.bindFailures(ctx); err != nil {
		return err
	}
	if res.Replicas, err = b.replicaStats(ctx); err != nil {
		return err
	}
	res.overcommitted, err = b.check(ctx)
	return err
}

// addNodes creates the nodes, 16 at a time, each with 8 cards of 16 GiB published as the
// share-plugin does; with the extender it waits until every replica's cache holds them all.
func (b *bench) addNodes(ctx context.Context) error {
	names := make([]string, b.o.nodes)
	for i := range names {
		names[i] = fmt.Sprintf("node-%04d", i)
	}
	if b.o.dra {
		return b.addDRANodes(ctx, names)
	}
	if err := benchrun.AddGPUNodes(ctx, b.c, names, 8, 16, 16); err != nil {
		return err
	}
	for i, ext := range b.exts {
		if err := benchrun.WaitCached(ctx, ext, b.names[i]+" cache to hold every node", b.o.nodes); err != nil {
			return err
		}
	}
	return nil
}

// creator returns the client that creates the pods: limited to o.createQPS, none when 0.
func (b *bench) creator() (kubernetes.Interface, error) {
	qps, burst := float32(-1), 0
	if b.o.createQPS > 0 {
		qps, burst = float32(b.o.createQPS), int(2*b.o.createQPS)
	}
	return kubernetes.NewForConfig(b.c.RestConfigWithLimits(qps, burst))
}

// createPods creates the pods through client from 16 goroutines, pod i asking i%8+1 GiB.
func (b *bench) createPods(ctx context.Context, client kubernetes.Interface) error {
	var failed atomic.Value
	next := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				name := fmt.Sprintf("pod-%05d", i)
				pod := b.newPod(name, int64(i%8+1))
				b.mu.Lock()
				b.created[name] = time.Now()
				b.mu.Unlock()
				if _, err := client.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
					failed.Store(err)
				}
			}
		}()
	}
	for i := range b.o.pods {
		next <- i
	}
	close(next)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return fmt.Errorf("create pods: %w", err)
	}
	return nil
}

// newPod is pod name of units GiB: a gpu-mem pod, or with --dra its claim form.
func (b *bench) newPod(name string, units int64) *v1.Pod {
	if b.draShapes != nil {
		return b.draShapes.pod(name, units)
	}
	return b.gpuPod(name, units)
}

// gpuPod is a pod named name whose one container asks units GiB of gpu-mem in its limits.
func (b *bench) gpuPod(name string, units int64) *v1.Pod {
	q := *resource.NewQuantity(units, resource.DecimalSI)
	return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: v1.PodSpec{
		SchedulerName: b.c.SchedulerName,
		Containers: []v1.Container{{Name: "main", Image: benchrun.PauseImage,
			Resources: v1.ResourceRequirements{Limits: v1.ResourceList{contract.DefaultResourceName: q}}}},
	}}
}

// observe notes when pod was bound, the first time it is seen bound.
func (b *bench) observe(pod *v1.Pod) {
	if pod.Spec.NodeName == "" {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, seen := b.bound[pod.Name]; !seen {
		if t, ok := b.created[pod.Name]; ok {
			b.bound[pod.Name] = time.Since(t)
		}
	}
}

// waitBound waits until every pod is bound, or nothing was bound for o.stall.
func (b *bench) waitBound(ctx context.Context) (bound int, stalled bool) {
	last, lastChange := -1, time.Now()
	for {
		b.mu.Lock()
		n := len(b.bound)
		b.mu.Unlock()
		if n == b.o.pods {
			return n, false
		}
		if n != last {
			last, lastChange = n, time.Now()
		}
		if time.Since(lastChange) > b.o.stall || ctx.Err() != nil {
			return n, true
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *bench) latencies() []time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]time.Duration, 0, len(b.bound))
	for _, d := range b.bound {
		out = append(out, d)
	}
	return out
}

// tail says when the slowest 1% of the pods were created: "second×pods" for each second of the
// run (from start) that has any, in order; it shows whether the tail is one burst or spread.
func (b *bench) tail(start time.Time) string {
	b.mu.Lock()
	type pod struct {
		created time.Time
		lat     time.Duration
	}
	pods := make([]pod, 0, len(b.bound))
	for name, d := range b.bound {
		pods = append(pods, pod{b.created[name], d})
	}
	b.mu.Unlock()
	slices.SortFunc(pods, func(x, y pod) int { return cmp.Compare(y.lat, x.lat) })
	perSecond := map[int]int{}
	for _, p := range pods[:len(pods)/100] {
		perSecond[int(p.created.Sub(start).Seconds())]++
	}
	var parts []string
	for _, sec := range slices.Sorted(maps.Keys(perSecond)) {
		parts = append(parts, fmt.Sprintf("%d×%d", sec, perSecond[sec]))
	}
	return strings.Join(parts, " ")
}

// check returns the number of cards over capacity: with --dra, by the allocated claims
// (checkDRA); with the extender, by the placements and each replica's audit (an error when
// anything else is wrong); alone, kube-scheduler only counts a node's total, which is checked
// per node.
func (b *bench) check(ctx context.Context) (int, error) {
	if b.o.dra {
		return b.checkDRA(ctx)
	}
	for i, ext := range b.exts {
		inv, err := b.checkReplica(ctx, ext)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", b.names[i], err)
		}
		if !inv.OK() {
			return len(inv.Overcommitted), fmt.Errorf("invariant check failed (%s): %s", b.names[i], inv)
		}
	}
	if b.ext != nil {
		return 0, nil
	}
	pods, err := b.c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	perNode := map[string]int64{}
	for _, p := range pods.Items {
		q := p.Spec.Containers[0].Resources.Limits[contract.DefaultResourceName]
		perNode[p.Spec.NodeName] += q.Value()
	}
	over := 0
	for node, u := range perNode {
		if node != "" && u > 8*16 {
			over++
		}
	}
	if over > 0 {
		return over, fmt.Errorf("%d nodes hold more gpu-mem than they have", over)
	}
	return 0, nil
}

// checkReplica checks the invariants with ext's audit, again for up to 10 s while they do not
// hold: a follower's cache learns the leader's last binds from its watch, a moment later.
func (b *bench) checkReplica(ctx context.Context, ext *framework.Extender) (framework.Invariants, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		inv, err := b.c.CheckInvariants(ctx, namespace, ext)
		if err != nil || inv.OK() || time.Now().After(deadline) {
			return inv, err
		}
		select {
		case <-ctx.Done():
			return inv, nil
		case <-time.After(time.Second):
		}
	}
}
