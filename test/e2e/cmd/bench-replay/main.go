// Command bench-replay measures placement in production: it replays the simulator's exact
// submission sequence of an openb trace (github.com/alibaba/clusterdata, cluster-trace-gpu-v2023)
// through a real kube-apiserver and kube-scheduler running the shipped
// config/scheduler-config.yaml with the gpushare extender, one pod at a time (each placed once or
// rejected, the FGD paper's protocol), and compares the allocation with the simulator's for the
// same trace, policy and seed. It prints a table; its last line is one JSON object.
//
//	bench-replay --trace-dir ../shared/traces/openb-2023 [--trace default] [--policy fgd-online] [--seed 42]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gpushare/gpushare/pkg/placement/policies"
	"github.com/gpushare/gpushare/pkg/sim"
	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// options is the command line.
type options struct {
	traceDir, trace, policy string
	seed                    int
	inflate                 float64
	dir                     string
	schedulerConfig         string
	extender                string
	taintGPUNodes           bool
}

func main() {
	registry := policies.NewRegistry()
	o := options{trace: "default", policy: policies.Default, seed: 42, inflate: 1.3}
	flag.StringVar(&o.traceDir, "trace-dir", o.traceDir, "folder of the openb CSVs (openb_node_list_gpu_node.csv, openb_pod_list_<trace>.csv)")
	flag.StringVar(&o.trace, "trace", o.trace, "trace name: default, gpushare40, gpushare100, multigpu50, gpuspec33, ...")
	flag.StringVar(&o.policy, "policy", o.policy, fmt.Sprintf("placement policy, one of %v", registry.Names()))
	flag.IntVar(&o.seed, "seed", o.seed, "the simulator's seed: the submission sequence")
	flag.Float64Var(&o.inflate, "inflate", o.inflate, "total GPU request submitted, as a multiple of GPU capacity")
	flag.StringVar(&o.dir, "dir", "", "cluster folder (logs, data); default a temporary folder, removed at the end")
	flag.StringVar(&o.schedulerConfig, "scheduler-config", "", "KubeSchedulerConfiguration to run kube-scheduler with (default: the shipped config/scheduler-config.yaml)")
	flag.StringVar(&o.extender, "extender", "", "extender binary to run (default: built from this checkout)")
	flag.BoolVar(&o.taintGPUNodes, "taint-gpu-nodes", false, "taint every node so that only pods asking gpu-mem go there (pods without gpu-mem are then rejected: every openb node has GPUs)")
	flag.Parse()
	benchrun.Main("bench-replay", func(ctx context.Context) error { return run(ctx, o, registry) })
}

// logf writes one log line of the command.
func logf(format string, args ...any) { benchrun.Logger("replay")(format, args...) }

func run(ctx context.Context, o options, registry policies.Registry) error {
	if o.traceDir == "" {
		return fmt.Errorf("--trace-dir is required (the openb-2023 trace's folder)")
	}
	if _, err := registry.New(o.policy); err != nil {
		return err
	}
	if o.seed < 0 || o.inflate <= 0 {
		return fmt.Errorf("--seed must be non-negative and --inflate positive")
	}
	nodes, pods, err := sim.LoadTrace(filepath.Join(o.traceDir, "openb_node_list_gpu_node.csv"),
		filepath.Join(o.traceDir, "openb_pod_list_"+o.trace+".csv"))
	if err != nil {
		return err
	}
	ws, err := framework.NewWorkspace(o.dir, "gpushare-replay-", o.extender)
	if err != nil {
		return err
	}
	defer ws.Cleanup()
	newRun := func() (*sim.Run, error) {
		policy, err := registry.New(o.policy)
		return &sim.Run{Nodes: nodes, Pods: pods, Policy: policy, Inflate: o.inflate, Seed: uint64(o.seed)}, err //nolint:gosec // G115: checked non-negative above
	}
	schedConfig := o.schedulerConfig
	if schedConfig == "" {
		schedConfig = framework.SchedulerConfigPath(ws.Root)
	}
	percentage, err := framework.PercentageOfNodesToScore(schedConfig)
	if err != nil {
		return err
	}
	// The paper's protocol (seeded ties, every node, every pod learned at submission), and the
	// simulator's model of production, which the production run is compared with.
	simulate := func(what string, model bool) (*sim.Result, error) {
		r, err := newRun()
		if err != nil {
			return nil, err
		}
		if model {
			r.ModelProduction(int(percentage))
		}
		res, err := r.Execute()
		if err != nil {
			return nil, fmt.Errorf("simulator: %w", err)
		}
		logf("simulator, %s: %d of %d pods placed, %.2f %% allocated at 100 %% arrived", what, res.Placed, res.Submitted, res.AllocAt(100))
		return res, nil
	}
	paper, err := simulate("the paper's protocol", false)
	if err != nil {
		return err
	}
	modelled, err := simulate("production's model", true)
	if err != nil {
		return err
	}

	p, err := startProduction(ctx, framework.Options{Root: ws.Root, Bin: ws.Bin, Dir: filepath.Join(ws.Dir, "cluster"),
		SchedulerConfig: o.schedulerConfig, Logf: logf}, ws.Extender, o.policy, o.taintGPUNodes)
	if err != nil {
		return err
	}
	defer p.cluster.Stop()
	if err := p.addNodes(ctx, nodes); err != nil {
		return err
	}
	r, err := newRun()
	if err != nil {
		return err
	}
	p.expected = modelled.Nodes
	start := time.Now()
	produced, err := r.ExecuteOn(p.submitter(ctx))
	if err != nil {
		return fmt.Errorf("production: %w", err)
	}
	elapsed := time.Since(start)
	inv, err := p.cluster.CheckInvariants(ctx, namespace, p.ext)
	if err != nil {
		return err
	}
	rep := newReport(o, modelled, produced, p.latencies, elapsed, inv)
	rep.Paper = allocationOf(paper)
	rep.percentage = percentage
	produced.Nodes = p.nodes
	rep.differ = diverge(produced, modelled)
	rep.gpuLatency, rep.cpuLatency = quantiles(p.gpuLatencies), quantiles(p.cpuLatencies)
	if err := rep.write(os.Stdout); err != nil {
		return err
	}
	if !inv.OK() {
		return fmt.Errorf("invariant check failed: %s", inv)
	}
	return nil
}
