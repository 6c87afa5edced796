package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
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
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gpushare/gpushare/pkg/contract"
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

// replicaStats is what one extender replica did in a run, by its /metrics.
type replicaStats struct {
	Name string `json:"name"`
	// Leading is whether it led at the end of the run.
	Leading bool `json:"leading"`
	// Binds and BindFailures are its gpushare_bind_total and gpushare_bind_failures_total,
	// Filters its gpushare_filter_total (calls it answered itself), Forwarded the calls it
	// forwarded to the leader (gpushare_forwarded_requests_total, outcome forwarded).
	Binds        int `json:"binds"`
	BindFailures int `json:"bind_failures"`
	Filters      int `json:"filters"`
	Forwarded    int `json:"forwarded"`
	// Connections is how many connections the connection front gave it (that front only).
	Connections *int `json:"connections,omitempty"`
}

func (r result) String() string {
	s := fmt.Sprintf("%d bound, %.1f pods/s, create→bound p50 %.0f ms p99 %.0f ms, %d bind failures, %d cards over capacity",
		r.bound, r.PodsPerS, r.P50Ms, r.P99Ms, r.BindFailures, r.overcommitted)
	if r.stalled {
		s += ", STALLED"
	}
	return s
}

func (b *bench) run(ctx context.Context) (result, error) {
	c, err := framework.New(b.opts)
	if err != nil {
		return result{}, err
	}
	b.c = c
	defer c.Stop()
	if err := c.StartControlPlane(ctx); err != nil {
		return result{}, err
	}
	if err := c.EnsureNamespace(ctx, namespace); err != nil {
		return result{}, err
	}
	host := "127.0.0.1:1" // kube-scheduler alone: no extender in its configuration
	var profileAddrs []string
	if b.mode.extender != "" {
		var closeFront func()
		if host, profileAddrs, closeFront, err = b.startExtenders(ctx); err != nil {
			return result{}, err
		}
		defer closeFront()
	}
	if err := c.StartScheduler(host); err != nil {
		return result{}, err
	}
	if err := b.addNodes(ctx); err != nil {
		return result{}, err
	}
	if b.o.handover && len(b.exts) > 1 {
		if err := b.handOver(ctx); err != nil {
			return result{}, err
		}
	}
	b.created, b.bound = map[string]time.Time{}, map[string]time.Duration{}
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(namespace))
	inf := factory.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    b.observe,
		UpdateFunc: func(_, obj any) { b.observe(obj) },
	}); err != nil {
		return result{}, err
	}
	ictx, stopInformer := context.WithCancel(ctx)
	defer stopInformer()
	factory.Start(ictx.Done())
	toolscache.WaitForCacheSync(ictx.Done(), inf.HasSynced)

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
	if res.BindFailures, err = b.bindFailures(ctx); err != nil {
		return res, err
	}
	if res.Replicas, err = b.replicaStats(ctx); err != nil {
		return res, err
	}
	if res.overcommitted, err = b.check(ctx); err != nil {
		return res, err
	}
	return res, nil
}

// letters name the replicas, one each (maxReplicas).
const letters = "abcdefghijklmnopqrstuvwxyz"

// replicaName is the process name of extender replica i: "extender", then "extender-b",
// "extender-c"...; replicaIdentity is its name in the leader election's Lease.
func replicaName(i int) string {
	if i == 0 {
		return "extender"
	}
	return "extender-" + letters[i:i+1]
}

func replicaIdentity(i int) string { return "ext-" + letters[i:i+1] }

// startExtenders starts the extender's replicas and, with several or with --front, the front
// before them. It returns the host kube-scheduler calls, each replica's profiling address (with
// --cpu-profile) and what closes the front.
func (b *bench) startExtenders(ctx context.Context) (host string, profileAddrs []string, closeFront func(), err error) {
	closeFront = func() {}
	for i := range b.o.replicas {
		args := append([]string{"--v=1"}, strings.Fields(b.o.extenderArgs)...)
		if b.o.replicas > 1 {
			args = append(args, "--leader-elect=true", "--leader-elect-identity="+replicaIdentity(i))
		}
		if b.o.profile != "" {
			port, err := framework.FreePort()
			if err != nil {
				return "", nil, closeFront, err
			}
			profileAddrs = append(profileAddrs, fmt.Sprintf("127.0.0.1:%d", port))
			args = append(args, "--profiling-address="+profileAddrs[i])
		}
		ext, err := b.c.StartExtenderAs(ctx, replicaName(i), b.mode.extender, 0, args...)
		if err != nil {
			return "", nil, closeFront, fmt.Errorf("%s: %w", replicaName(i), err)
		}
		b.exts, b.names, b.args = append(b.exts, ext), append(b.names, replicaName(i)), append(b.args, args)
	}
	b.ext = b.exts[0]
	if b.o.replicas > 1 {
		if err := b.waitLeader(ctx); err != nil {
			return "", nil, closeFront, err
		}
	}
	// The followers come first behind a front: kube-scheduler's first connection, and the first
	// call, land on a follower, the case that cost binds before followers forwarded.
	behind := b.followersFirst(ctx)
	b.frontOrder = behind
	switch b.o.frontUsed() {
	case frontNone:
		return b.ext.Host(), profileAddrs, closeFront, nil
	case frontConnection:
		f, err := b.c.StartConnFront(behind...)
		if err != nil {
			return "", nil, closeFront, err
		}
		b.conns = f.Conns
		return f.Host, profileAddrs, f.Close, nil
	default:
		start := b.c.StartRoundRobin
		if b.o.front == frontRequestLeader {
			start = b.c.StartLeaderRoundRobin
		}
		f, err := start(behind...)
		if err != nil {
			return "", nil, closeFront, err
		}
		return f.Host, profileAddrs, f.Close, nil
	}
}

// handOver stops the leading replica (it releases the Lease on SIGTERM), waits until another
// leads, and starts the stopped one again on its port, where the front still sends to it.
func (b *bench) handOver(ctx context.Context) error {
	for i, ext := range b.exts {
		if lead, err := ext.Leading(ctx); err != nil || !lead {
			continue
		}
		logf("handover: stopping %s, the leader", b.names[i])
		ext.Proc.Stop(20 * time.Second)
		start := time.Now()
		if err := b.waitLeader(ctx); err != nil {
			return err
		}
		logf("handover: a new leader after %.1f s; restarting %s as a follower", time.Since(start).Seconds(), b.names[i])
		again, err := b.c.StartExtenderAs(ctx, b.names[i], b.mode.extender, ext.Port, b.args[i]...)
		if err != nil {
			return fmt.Errorf("restart %s: %w", b.names[i], err)
		}
		b.exts[i] = again
		b.ext = b.exts[0]
		if j := slices.Index(b.frontOrder, ext); j >= 0 {
			b.frontOrder[j] = again
		}
		return nil
	}
	return errors.New("handover: no replica leads")
}

// waitLeader waits until one replica says it leads, and logs which.
func (b *bench) waitLeader(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return framework.WaitFor(ctx, 250*time.Millisecond, "an extender replica to lead", func() (bool, error) {
		for i, ext := range b.exts {
			if lead, err := ext.Leading(ctx); err == nil && lead {
				logf("%s (%s) leads", b.names[i], replicaIdentity(i))
				return true, nil
			}
		}
		return false, nil
	})
}

// followersFirst is the replicas with those that do not lead first.
func (b *bench) followersFirst(ctx context.Context) []*framework.Extender {
	var lead, follow []*framework.Extender
	for _, ext := range b.exts {
		if l, err := ext.Leading(ctx); err == nil && l {
			lead = append(lead, ext)
		} else {
			follow = append(follow, ext)
		}
	}
	return append(follow, lead...)
}

// replicaStats reads each replica's bind and filter counters (and whether it leads), and the
// connections the connection front gave it.
func (b *bench) replicaStats(ctx context.Context) ([]replicaStats, error) {
	var conns []int
	if b.conns != nil {
		conns = b.conns()
	}
	out := make([]replicaStats, 0, len(b.exts))
	for i, ext := range b.exts {
		m, err := ext.Metrics(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s metrics: %w", b.names[i], err)
		}
		lead, err := ext.Leading(ctx)
		if err != nil {
			return nil, fmt.Errorf("%s /readyz: %w", b.names[i], err)
		}
		st := replicaStats{Name: b.names[i], Leading: lead, Binds: int(m["gpushare_bind_total"]),
			BindFailures: int(m["gpushare_bind_failures_total"]), Filters: int(m["gpushare_filter_total"])}
		for k, v := range m {
			if strings.HasPrefix(k, "gpushare_forwarded_requests_total{") && strings.Contains(k, `outcome="forwarded"`) {
				st.Forwarded += int(v)
			}
		}
		if j := slices.Index(b.frontOrder, ext); conns != nil && j >= 0 && j < len(conns) {
			st.Connections = &conns[j]
		}
		logf("%s: %d binds, %d bind failures, %d filters, leading %t", st.Name, st.Binds, st.BindFailures, st.Filters, st.Leading)
		out = append(out, st)
	}
	return out, nil
}

// profile writes a 20 s CPU profile of the extender replica name into o.profile.
func (b *bench) profile(ctx context.Context, name, addr string) {
	file := filepath.Base(b.opts.Dir) + ".pprof"
	if name != replicaName(0) {
		file = filepath.Base(b.opts.Dir) + "-" + name + ".pprof"
	}
	path := filepath.Join(b.o.profile, file)
	if err := framework.SaveProfile(ctx, "http://"+addr+"/debug/pprof/profile?seconds=20", path); err != nil {
		logf("profile of %s: %v", name, err)
		return
	}
	logf("CPU profile of %s: %s", name, path)
}

// profileAPIServer writes a 20 s CPU profile of kube-apiserver into o.profile.
func (b *bench) profileAPIServer(ctx context.Context) {
	path := filepath.Join(b.o.profile, filepath.Base(b.opts.Dir)+"-apiserver.pprof")
	raw, err := b.c.Client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "20").
		Timeout(time.Minute).DoRaw(ctx)
	if err == nil {
		err = os.WriteFile(path, raw, 0o644)
	}
	if err != nil {
		logf("profile of kube-apiserver: %v", err)
		return
	}
	logf("CPU profile of kube-apiserver: %s", path)
}

// cpuTimes is the CPU time used so far by each process of the cluster and by this program.
func (b *bench) cpuTimes() map[string]time.Duration {
	out := b.c.CPUTimes()
	if d, err := framework.CPUTime(os.Getpid()); err == nil {
		out["bench"] = d
	}
	return out
}

// addNodes creates the nodes, 16 at a time, each with 8 cards of 16 GiB published as the
// share-plugin does; with the extender it waits until every replica's cache holds them all.
func (b *bench) addNodes(ctx context.Context) error {
	sem := make(chan struct{}, 16)
	errs := make(chan error, b.o.nodes)
	for i := range b.o.nodes {
		go func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			node, alloc, err := framework.GPUNode(fmt.Sprintf("node-%04d", i), 8, 16)
			if err == nil {
				err = b.c.AddReadyNode(ctx, node, alloc)
			}
			errs <- err
		}()
	}
	for range b.o.nodes {
		if err := <-errs; err != nil {
			return err
		}
	}
	for i, ext := range b.exts {
		err := framework.WaitFor(ctx, 250*time.Millisecond, b.names[i]+" cache to hold every node", func() (bool, error) {
			var inv struct {
				Nodes []struct{} `json:"nodes"`
			}
			err := ext.GetJSON(ctx, framework.ExtenderPrefix+"/inspect", &inv)
			return err == nil && len(inv.Nodes) == b.o.nodes, err
		})
		if err != nil {
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
				q := *resource.NewQuantity(int64(i%8+1), resource.DecimalSI)
				pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, Spec: v1.PodSpec{
					SchedulerName: b.c.SchedulerName,
					Containers: []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
						Resources: v1.ResourceRequirements{Limits: v1.ResourceList{contract.DefaultResourceName: q}}}},
				}}
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

func (b *bench) observe(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Spec.NodeName == "" {
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

// logHandlerTimes logs an extender replica's own time per filter and bind call (its
// request-duration histogram): the mean and the share of calls within some bounds.
func (b *bench) logHandlerTimes(ctx context.Context, replica string, ext *framework.Extender) {
	m, err := ext.Metrics(ctx)
	if err != nil {
		logf("%s metrics: %v", replica, err)
		return
	}
	const name = "gpushare_extender_request_duration_seconds"
	for _, verb := range []string{"filter", "bind"} {
		count := m[fmt.Sprintf(`%s_count{verb=%q}`, name, verb)]
		if count == 0 {
			continue
		}
		msg := fmt.Sprintf("%s %s: %.0f calls, mean %.2f ms;", replica, verb, count, 1000*m[fmt.Sprintf(`%s_sum{verb=%q}`, name, verb)]/count)
		for _, le := range []string{"0.001", "0.0025", "0.005", "0.01", "0.025"} {
			msg += fmt.Sprintf(" <=%s s %.1f%%", le, 100*m[fmt.Sprintf(`%s_bucket{verb=%q,le=%q}`, name, verb, le)]/count)
		}
		logf("%s", msg)
	}
}

// bindFailures counts the scheduling failures kube-scheduler reported for binding (its
// FailedScheduling Events that name a binding).
func (b *bench) bindFailures(ctx context.Context) (int, error) {
	evs, err := b.c.Client.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: "reason=FailedScheduling"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, ev := range evs.Items {
		if strings.Contains(strings.ToLower(ev.Message), "bind") {
			n += max(int(ev.Count), 1)
		}
	}
	return n, nil
}

// check returns the number of cards over capacity: with the extender, by the placements and
// each replica's audit (an error when anything else is wrong); alone, kube-scheduler only
// counts a node's total, which is checked per node.
func (b *bench) check(ctx context.Context) (int, error) {
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

// apiRequests is kube-apiserver's count of requests so far by verb, resource and subresource
// (its apiserver_request_total summed over the other labels); nil if its metrics cannot be read.
func (b *bench) apiRequests(ctx context.Context) map[string]float64 {
	raw, err := b.c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		logf("kube-apiserver metrics: %v", err)
		return nil
	}
	m, err := framework.ParseMetrics(raw)
	if err != nil {
		logf("kube-apiserver metrics: %v", err)
		return nil
	}
	out := map[string]float64{}
	for series, v := range m {
		if labels, ok := strings.CutPrefix(series, "apiserver_request_total{"); ok {
			key := strings.TrimSpace(label(labels, "verb") + " " + label(labels, "resource") + " " + label(labels, "subresource"))
			out[key] += v
		}
	}
	return out
}

// label is the value of name in a Prometheus series' labels (`a="x",b="y"}`), "" if absent.
func label(labels, name string) string {
	_, rest, ok := strings.Cut(","+labels, ","+name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// logAPIRequests logs the requests kube-apiserver served since before (apiRequests), the
// kinds with at least 100 of them: what each mode asks of the API server per run.
func (b *bench) logAPIRequests(ctx context.Context, before map[string]float64) {
	after := b.apiRequests(ctx)
	if before == nil || after == nil {
		return
	}
	var parts []string
	for _, key := range slices.Sorted(maps.Keys(after)) {
		if n := after[key] - before[key]; n >= 100 {
			parts = append(parts, fmt.Sprintf("%s %.0f", key, n))
		}
	}
	logf("%s run: kube-apiserver requests: %s", b.mode.name, strings.Join(parts, ", "))
}
