package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"
)

// report is the JSON object on the last line.
type report struct {
	Nodes              int      `json:"nodes"`
	Pods               int      `json:"pods"`
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
	pr := &printer{w: tw}
	qps := "kube-scheduler's default client QPS"
	if o.schedulerQPS > 0 {
		qps = fmt.Sprintf("kube-scheduler client QPS %g / burst %d", o.schedulerQPS, o.schedulerBurst)
	}
	pr.printf("%d nodes x 8 x 16 GiB, %d pods of 1-8 GiB from 16 goroutines, %s\n", r.Nodes, r.Pods, qps)
	pr.printf("%s\n", "mode\tpods/s\tcreate→bound p50\tp99\tbind failures\tbound\t")
	for _, res := range r.Runs {
		stalled := ""
		if res.stalled {
			stalled = " (stalled)"
		}
		pr.printf("%s\t%.1f\t%.0f ms\t%.0f ms\t%d\t%d%s\t\n", res.Mode, res.PodsPerS, res.P50Ms, res.P99Ms, res.BindFailures, res.bound, stalled)
	}
	aloneRate, aloneP99 := r.median(modeAlone)
	extRate, extP99 := r.median(modeExtender)
	pr.printf("median\textender %.0f %% of kube-scheduler alone's pods/s, p99 %.2fx\t\t\t\t\t\n", 100*extRate/aloneRate, extP99/aloneP99)
	if pr.err != nil {
		return pr.err
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	raw, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", raw)
	return err
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

// percentile is the q-quantile of ds (nearest rank), 0 when empty.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())/10) / 100 }

// printer prints to w until the first error, which it keeps.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}
