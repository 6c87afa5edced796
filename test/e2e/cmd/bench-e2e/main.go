// Command bench-e2e measures scheduling throughput on a real control plane: kube-scheduler alone
// (gpu-mem counted as a plain extended resource) against kube-scheduler with the gpushare
// extender and the shipped config/scheduler-config.yaml, in one invocation, RUNS times each,
// every run on a fresh kube-apiserver with NODES nodes of 8 x 16 GiB cards and PODS pods of
// 1-8 GiB created by 16 goroutines. It prints a table; its last line is one JSON object.
//
//	bench-e2e [--nodes 1000] [--pods 5000] [--runs 3] [--scheduler-qps 0] [--create-qps 0]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/gpushare/gpushare/test/e2e/framework"
)

// options is the command line.
type options struct {
	nodes, pods, runs int
	// schedulerQPS and schedulerBurst are kube-scheduler's client limits; 0 keeps its defaults.
	schedulerQPS   float64
	schedulerBurst int
	// stall ends a run that bound nothing for this long.
	stall time.Duration
	dir   string
	// extender is a prebuilt extender binary; empty builds this checkout's.
	extender string
	// profile, if set, is a folder for a CPU profile of the extender in each extender run.
	profile string
	// extenderArgs are more flags for the extender.
	extenderArgs string
	// createQPS limits the client that creates the pods (burst twice that); 0 leaves it
	// unlimited, so that the pods arrive as fast as kube-apiserver accepts them.
	createQPS float64
	// schedulerConfig is the extender mode's KubeSchedulerConfiguration; empty means the
	// shipped config/scheduler-config.yaml.
	schedulerConfig string
}

func main() {
	o := options{nodes: 1000, pods: 5000, runs: 3, stall: 2 * time.Minute}
	flag.IntVar(&o.nodes, "nodes", o.nodes, "nodes of 8 x 16 GiB cards")
	flag.IntVar(&o.pods, "pods", o.pods, "pods of 1-8 GiB, created by 16 goroutines")
	flag.IntVar(&o.runs, "runs", o.runs, "runs of each mode")
	flag.Float64Var(&o.schedulerQPS, "scheduler-qps", 0, "kube-scheduler's client QPS (0: kube-scheduler's default)")
	flag.IntVar(&o.schedulerBurst, "scheduler-burst", 0, "kube-scheduler's client burst (0: kube-scheduler's default)")
	flag.DurationVar(&o.stall, "stall", o.stall, "a run that binds nothing for this long has stalled and ends")
	flag.StringVar(&o.dir, "dir", "", "folder for the clusters' data and logs (default: a temporary folder, removed)")
	flag.StringVar(&o.extender, "extender", "", "extender binary (default: built from this checkout)")
	flag.StringVar(&o.profile, "cpu-profile", "", "folder for 20-s CPU profiles of kube-apiserver (every run) and of the extender (extender runs), from the first pod on")
	flag.Float64Var(&o.createQPS, "create-qps", 0, "client QPS of the 16 goroutines creating the pods, burst twice that (0: no limit, the pods arrive as fast as kube-apiserver takes them and the run measures each mode's capacity; 200: they arrive at about 200 per second)")
	flag.StringVar(&o.schedulerConfig, "scheduler-config", "", "KubeSchedulerConfiguration of the extender's runs (default: the shipped config/scheduler-config.yaml); kube-scheduler alone runs with its defaults")
	flag.StringVar(&o.extenderArgs, "extender-args", "", "more flags for the extender, separated by spaces (e.g. --filter-chooses-node=false)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-e2e:", err)
		os.Exit(1)
	}
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[bench %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, o options) error {
	if o.nodes < 1 || o.pods < 1 || o.runs < 1 {
		return fmt.Errorf("--nodes, --pods and --runs must be positive")
	}
	if o.pods > o.nodes*8*16/2 {
		return fmt.Errorf("%d pods of up to 8 GiB may not fit %d nodes of 8 x 16 GiB; use at most %d", o.pods, o.nodes, o.nodes*8*16/2)
	}
	ws, err := framework.NewWorkspace(o.dir, "gpushare-bench-", o.extender)
	if err != nil {
		return err
	}
	defer ws.Cleanup()
	root, bin, dir, ext := ws.Root, ws.Bin, ws.Dir, ws.Extender
	alone := filepath.Join(dir, "scheduler-only.yaml")
	if err := os.WriteFile(alone, []byte("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"), 0o644); err != nil {
		return err
	}
	rep := report{Nodes: o.nodes, Pods: o.pods}
	for i := range o.runs {
		for _, m := range []mode{{name: modeAlone, config: alone}, {name: modeExtender, config: o.schedulerConfig, extender: ext}} {
			b := &bench{o: o, mode: m, opts: framework.Options{Root: root, Bin: bin, Dir: filepath.Join(dir, fmt.Sprintf("%s-%d", m.name, i+1)),
				SchedulerConfig: m.config, SchedulerQPS: o.schedulerQPS, SchedulerBurst: o.schedulerBurst, Logf: logf}}
			res, err := b.run(ctx)
			if err != nil {
				return fmt.Errorf("%s run %d: %w", m.name, i+1, err)
			}
			logf("%s run %d: %s", m.name, i+1, res)
			rep.add(res)
		}
	}
	return rep.write(os.Stdout, o)
}
