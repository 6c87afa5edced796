package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/test/e2e/framework"
)

// What a run measures besides bind latency: CPU profiles and times, the extender's handler
// times, kube-apiserver's requests and kube-scheduler's bind failures.

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
