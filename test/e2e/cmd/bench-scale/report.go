package main

import (
	"io"
	"text/tabwriter"

	"github.com/gpushare/gpushare/test/e2e/framework"
)

// report is the JSON object on the last line.
type report struct {
	Nodes       int       `json:"nodes"`
	Pods        int       `json:"pods"`
	ReadyS      float64   `json:"ready_s"`
	RSSReadyMiB float64   `json:"rss_ready_mib"`
	RSSAfterMiB float64   `json:"rss_after_mib"`
	RSSPeakMiB  float64   `json:"rss_peak_mib"`
	Filter      []latency `json:"filter"`
	// Prioritize is for pods without gpu-mem, which the shipped configuration sends to
	// prioritize only (a gpu-mem pod's cycle is filter alone: filter chooses its node).
	Prioritize []latency `json:"prioritize"`
}

// latency is one verb's latency for one candidate count.
type latency struct {
	Candidates int     `json:"candidates"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
}

// Write prints the table, then the JSON line.
func (r *report) Write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	pr := &framework.Printer{W: tw}
	pr.Printf("%d nodes x 8 x 16 GiB, %d running pods of 4 GiB\t\t\t\n", r.Nodes, r.Pods)
	pr.Printf("extender ready after start\t%.2f s\t\t\n", r.ReadyS)
	pr.Printf("resident memory: at ready / after the calls / peak (with a scrape and the audit)\t%.0f / %.0f / %.0f MiB\t\t\n", r.RSSReadyMiB, r.RSSAfterMiB, r.RSSPeakMiB)
	for _, l := range r.Filter {
		pr.Printf("filter over HTTPS, %d candidates\tp50 %.2f ms\tp99 %.2f ms\t\n", l.Candidates, l.P50Ms, l.P99Ms)
	}
	for _, l := range r.Prioritize {
		pr.Printf("prioritize over HTTPS, pod without gpu-mem, %d candidates\tp50 %.2f ms\tp99 %.2f ms\t\n", l.Candidates, l.P50Ms, l.P99Ms)
	}
	return pr.Finish(tw.Flush, w, r)
}
