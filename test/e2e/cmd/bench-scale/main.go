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
	"os"
	"path/filepath"

	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// options is the command line.
type options struct {
	nodes, pods, calls int
	dir                string
	// extender is a prebuilt extender binary; empty builds this checkout's.
	extender string
	// extenderArgs are more flags for the extender.
	extenderArgs string
	// profile, if set, is a folder for heap profiles of the extender (at ready, after the calls)
	// and CPU profiles (5 s of filter calls per candidate count).
	profile string
}

func main() {
	o := options{nodes: 5000, pods: 50000, calls: 300}
	flag.IntVar(&o.nodes, "nodes", o.nodes, "nodes of 8 x 16 GiB cards")
	flag.IntVar(&o.pods, "pods", o.pods, "pods of 4 GiB running on them before the extender starts (at most 32 per node)")
	flag.IntVar(&o.calls, "calls", o.calls, "filter calls timed per candidate count")
	flag.StringVar(&o.dir, "dir", "", "folder for the cluster's data and logs (default: a temporary folder, removed)")
	flag.StringVar(&o.extender, "extender", "", "extender binary (default: built from this checkout)")
	flag.StringVar(&o.extenderArgs, "extender-args", "", "more flags for the extender, separated by spaces")
	flag.StringVar(&o.profile, "heap-profile", "", "folder to write the extender's heap profiles (at ready and after the calls) and CPU profiles (5 s of filter calls per candidate count) to")
	flag.Parse()
	benchrun.Main("bench-scale", func(ctx context.Context) error { return run(ctx, o) })
}

// logf writes one log line of the command.
func logf(format string, args ...any) { benchrun.Logger("bench-scale")(format, args...) }

func run(ctx context.Context, o options) error {
	if o.nodes < 1 || o.pods < 0 || o.calls < 1 || o.pods > o.nodes*32 {
		return fmt.Errorf("--nodes and --calls must be positive, --pods from 0 to 32 per node")
	}
	ws, err := framework.NewWorkspace(o.dir, "gpushare-scale-", o.extender)
	if err != nil {
		return err
	}
	defer ws.Cleanup()
	c, err := benchrun.StartCluster(ctx, framework.Options{Root: ws.Root, Bin: ws.Bin, Dir: filepath.Join(ws.Dir, "cluster"), Logf: logf}, namespace)
	if err != nil {
		return err
	}
	defer c.Stop()
	s, err := newScale(c, o)
	if err != nil {
		return err
	}
	rep, err := s.measure(ctx, ws.Extender)
	if err != nil {
		return err
	}
	return rep.write(os.Stdout)
}
