// Command bench-scale measures the extender at the size of a large cluster on a real control
// plane: NODES nodes of 8 x 16 GiB cards and PODS pods already running on them (created bound,
// with their placement annotations), then the extender started: how long until it is ready,
// its resident memory, and the latency of kube-scheduler's calls over mutual TLS with real JSON
// bodies for 500 candidate nodes and for every node. It prints a table; its last line is one
// JSON object.
package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
)

// options is the command line.
type options struct {
	// Flags are --dir, --extender and --extender-args.
	benchrun.Flags
	nodes, pods, calls int
	// profile, if set, is a folder for heap profiles of the extender (at ready, after the calls)
	// and CPU profiles (5 s of filter calls per candidate count).
	profile string
}

func main() {
	o := options{nodes: 5000, pods: 50000, calls: 300}
	flag.IntVar(&o.nodes, "nodes", o.nodes, "nodes of 8 x 16 GiB cards")
	flag.IntVar(&o.pods, "pods", o.pods, "pods of 4 GiB running on them before the extender starts (at most 32 per node)")
	flag.IntVar(&o.calls, "calls", o.calls, "filter calls timed per candidate count")
	flag.StringVar(&o.profile, "heap-profile", "", "folder to write the extender's heap profiles (at ready and after the calls) and CPU profiles (5 s of filter calls per candidate count) to")
	benchrun.Bench{
		Name: "bench-scale", TempPrefix: "gpushare-scale-", Logf: logf, Flags: &o.Flags,
		Usage: benchrun.Usage{
			Dir:          "folder for the cluster's data and logs (default: a temporary folder, removed)",
			Extender:     "extender binary (default: built from this checkout)",
			ExtenderArgs: "more flags for the extender, separated by spaces",
		},
		Check:   o.check, // o's address: the check reads the parsed command line
		Measure: func(ctx context.Context, env *benchrun.Env) (benchrun.Report, error) { return measure(ctx, env, o) },
	}.Main()
}

// logf writes one log line of the command.
func logf(format string, args ...any) { benchrun.Logger("bench-scale")(format, args...) }

// check checks the command line.
func (o *options) check() error {
	if o.nodes < 1 || o.pods < 0 || o.calls < 1 || o.pods > o.nodes*32 {
		return fmt.Errorf("--nodes and --calls must be positive, --pods from 0 to 32 per node")
	}
	return nil
}

// measure fills a fresh cluster and measures the extender on it.
func measure(ctx context.Context, env *benchrun.Env, o options) (benchrun.Report, error) {
	c, err := benchrun.StartCluster(ctx, env.ClusterOptions("cluster"), namespace)
	if err != nil {
		return nil, err
	}
	defer c.Stop()
	s, err := newScale(c, o)
	if err != nil {
		return nil, err
	}
	rep, err := s.measure(ctx, env.Extender)
	if err != nil {
		return nil, err
	}
	return rep, nil
}
