package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gpushare/gpushare/test/e2e/framework"
)

// report is the JSON object on the last line.
type report struct {
	// DRA says that the runs were DRA mode's (--dra).
	DRA   bool `json:"dra,omitempty"`
	Nodes int  `json:"nodes"`
	Pods  int  `json:"pods"`
	// Replicas is the number of extender replicas in the extender's runs, and Front how
	// kube-scheduler reached them: none (directly), request or connection.
	Replicas int    `json:"replicas"`
	Front    string `json:"front"`
	// Fence says that the extender's runs had its admission policies installed (--fence).
	Fence              bool     `json:"fence"`
	Runs               []result `json:"runs"`
	OvercommittedCards int      `json:"overcommitted_cards"`
}

func (r *report) add(res result) {
	r.Runs = append(r.Runs, res)
	r.OvercommittedCards += res.overcommitted
}

// median is the median pods/s and p99 of a mode's runs.
func (r *report) median(mode string) (podsPerS, p99 float64) {
	var rates, p99s []float64
	for _, res := range r.Runs {
		if res.Mode == mode {
			rates, p99s = append(rates, res.PodsPerS), append(p99s, res.P99Ms)
		}
	}
	return medianOf(rates), medianOf(p99s)
}

func (r *report) write(w io.Writer, o options) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	pr := &framework.Printer{W: tw}
	qps := "kube-scheduler's default client QPS"
	if o.schedulerQPS > 0 {
		qps = fmt.Sprintf("kube-scheduler client QPS %g / burst %d", o.schedulerQPS, o.schedulerBurst)
	}
	create := "as fast as kube-apiserver takes them"
	if o.createQPS > 0 {
		create = fmt.Sprintf("at most %g per second", o.createQPS)
	}
	pr.Printf("%d nodes x 8 x 16 GiB, %d pods of 1-8 GiB created by 16 goroutines %s, %s\n", r.Nodes, r.Pods, create, qps)
	if r.DRA {
		pr.Printf("DRA mode: each node's cards in a ResourceSlice, each pod in its claim form (one claim, made by kube-controller-manager); kube-scheduler's allocator picks the card and binds; the extender's runs: --dra-mode\n")
	}
	if o.SchedulerConfig != "" {
		pr.Printf("the extender's runs: kube-scheduler with %s\n", o.SchedulerConfig)
	}
	pr.Printf("the extender's runs: %s\n", replicasLine(r.Replicas, r.Front))
	if r.Fence {
		pr.Printf("the extender's runs: as its service account, its admission policies (the fence among them) installed\n")
	}
	pr.Printf("%s\n", "mode\tpods/s\tcreate→bound p50\tp99\tbind failures\tbound\t")
	for _, res := range r.Runs {
		stalled := ""
		if res.stalled {
			stalled = " (stalled)"
		}
		pr.Printf("%s\t%.1f\t%.0f ms\t%.0f ms\t%d\t%d%s\t\n", res.Mode, res.PodsPerS, res.P50Ms, res.P99Ms, res.BindFailures, res.bound, stalled)
	}
	r.writeReplicas(pr)
	r.writeCPU(pr)
	pr.Printf("median\t%s\t\t\t\t\t\n", r.medianLine())
	return pr.Finish(tw.Flush, w, r)
}

// medianLine compares the medians of the two modes, or gives the extender's alone when
// kube-scheduler alone did not run (--extender-only).
func (r *report) medianLine() string {
	extRate, extP99 := r.median(modeExtender)
	aloneRate, aloneP99 := r.median(modeAlone)
	if math.IsNaN(aloneRate) {
		return fmt.Sprintf("extender %.1f pods/s, p99 %.0f ms (kube-scheduler alone did not run)", extRate, extP99)
	}
	return fmt.Sprintf("extender %.0f %% of kube-scheduler alone's pods/s, p99 %.2fx", 100*extRate/aloneRate, extP99/aloneP99)
}

// replicasLine says how many replicas the extender's runs had and how kube-scheduler reached
// them.
func replicasLine(replicas int, front string) string {
	s := "1 replica"
	if replicas > 1 {
		s = fmt.Sprintf("%d replicas with leader election (only the leader binds)", replicas)
	}
	switch front {
	case frontRequest:
		return s + " behind a per-request front (each call to the next ready replica)"
	case frontRequestLeader:
		return s + " behind a per-request front that checks /readyz/leader (each call to the leader)"
	case frontConnection:
		return s + " behind a per-connection front (each TCP connection to the next ready replica, as a Service)"
	default:
		return s + ", called directly"
	}
}

// writeReplicas prints, per extender run, what each replica bound and refused (its
// gpushare_bind_total and gpushare_bind_failures_total), the filter calls it answered and, with
// the connection front, the connections it received.
func (r *report) writeReplicas(pr *framework.Printer) {
	pr.Printf("replica\tleading\tbinds\tbind failures\tfilters\tforwarded\tconnections\t\n")
	run := 0
	for _, res := range r.Runs {
		if res.Mode != modeExtender {
			continue
		}
		run++
		for _, st := range res.Replicas {
			conns := "-"
			if st.Connections != nil {
				conns = fmt.Sprint(*st.Connections)
			}
			pr.Printf("%s run %d: %s\t%t\t%d\t%d\t%d\t%d\t%s\t\n", res.Mode, run, st.Name, st.Leading, st.Binds, st.BindFailures, st.Filters, st.Forwarded, conns)
		}
	}
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())/10) / 100 }

// writeCPU prints, per run, the CPU seconds each process used per 1,000 pods bound, and the
// machine's load average: on a machine of few cores the processes compete for the same CPUs.
func (r *report) writeCPU(pr *framework.Printer) {
	names := map[string]bool{}
	for _, res := range r.Runs {
		for n := range res.cpu {
			names[n] = true
		}
	}
	order := slices.Sorted(maps.Keys(names))
	pr.Printf("CPU s per 1,000 pods bound\t%s\ttotal\t\n", strings.Join(order, "\t"))
	for _, res := range r.Runs {
		if res.bound == 0 {
			continue
		}
		per := 1000 / float64(res.bound)
		var total time.Duration
		cols := make([]string, 0, len(order))
		for _, n := range order {
			d := res.cpu[n]
			total += d
			cols = append(cols, fmt.Sprintf("%.1f", d.Seconds()*per))
		}
		pr.Printf("%s\t%s\t%.1f\t\n", res.Mode, strings.Join(cols, "\t"), total.Seconds()*per)
	}
}
