package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/gpushare/gpushare/pkg/placement/policies"
	"github.com/gpushare/gpushare/pkg/sim"
	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// replay is one replay: its command line, the policies it may name and the trace it names.
type replay struct {
	o        options
	registry policies.Registry
	nodes    []sim.Node
	pods     []sim.Pod
}

// check checks the command line and reads the trace it names.
func (r *replay) check() error {
	o := r.o
	if o.traceDir == "" {
		return fmt.Errorf("--trace-dir is required (the openb-2023 trace's folder)")
	}
	if _, err := r.registry.New(o.policy); err != nil {
		return err
	}
	if o.seed < 0 || o.inflate <= 0 {
		return fmt.Errorf("--seed must be non-negative and --inflate positive")
	}
	if err := r.checkDRA(); err != nil {
		return err
	}
	var err error
	r.nodes, r.pods, err = sim.LoadTrace(filepath.Join(o.traceDir, "openb_node_list_gpu_node.csv"),
		filepath.Join(o.traceDir, "openb_pod_list_"+o.trace+".csv"))
	return err
}

// measure runs the simulator under the paper's protocol and under its model of production,
// then production, and compares them.
func (r *replay) measure(ctx context.Context, env *benchrun.Env) (benchrun.Report, error) {
	if r.o.dra {
		return r.measureDRA(ctx, env)
	}
	schedConfig := r.o.SchedulerConfig
	if schedConfig == "" {
		schedConfig = framework.SchedulerConfigPath(env.Root)
	}
	percentage, err := framework.PercentageOfNodesToScore(schedConfig)
	if err != nil {
		return nil, err
	}
	// The paper's protocol (seeded ties, every node, every pod learned at submission), and the
	// simulator's model of production, which the production run is compared with.
	paper, err := r.simulate("the paper's protocol", false, percentage)
	if err != nil {
		return nil, err
	}
	modelled, err := r.simulate("production's model", true, percentage)
	if err != nil {
		return nil, err
	}
	rep, err := r.produce(ctx, env, modelled)
	if err != nil {
		return nil, err
	}
	rep.Paper = allocationOf(paper)
	rep.percentage = percentage
	if !rep.inv.OK() {
		return rep, fmt.Errorf("invariant check failed: %s", rep.inv)
	}
	return rep, nil
}

// newRun is a simulator run of the trace's submission sequence.
func (r *replay) newRun() (*sim.Run, error) {
	policy, err := r.registry.New(r.o.policy)
	return &sim.Run{Nodes: r.nodes, Pods: r.pods, Policy: policy, Inflate: r.o.inflate, Seed: uint64(r.o.seed)}, err //nolint:gosec // G115: checked non-negative in check
}

// simulate runs the simulator: under the paper's protocol, or with model modelling production
// with percentage as percentageOfNodesToScore.
func (r *replay) simulate(what string, model bool, percentage int32) (*sim.Result, error) {
	run, err := r.newRun()
	if err != nil {
		return nil, err
	}
	if model {
		run.ModelProduction(int(percentage))
	}
	res, err := run.Execute()
	if err != nil {
		return nil, fmt.Errorf("simulator: %w", err)
	}
	logf("simulator, %s: %d of %d pods placed, %.2f %% allocated at 100 %% arrived", what, res.Placed, res.Submitted, res.AllocAt(100))
	return res, nil
}

// produce replays the sequence on a real control plane and reports it against the simulator's
// model of production.
func (r *replay) produce(ctx context.Context, env *benchrun.Env, modelled *sim.Result) (report, error) {
	p, err := startProduction(ctx, env.ClusterOptions("cluster"), env.Extender, r.o.policy, r.o.taintGPUNodes)
	if err != nil {
		return report{}, err
	}
	defer p.cluster.Stop()
	if err := p.addNodes(ctx, r.nodes); err != nil {
		return report{}, err
	}
	run, err := r.newRun()
	if err != nil {
		return report{}, err
	}
	p.expected = modelled.Nodes
	start := time.Now()
	produced, err := run.ExecuteOn(p.submitter(ctx))
	if err != nil {
		return report{}, fmt.Errorf("production: %w", err)
	}
	elapsed := time.Since(start)
	inv, err := p.cluster.CheckInvariants(ctx, namespace, p.ext)
	if err != nil {
		return report{}, err
	}
	rep := newReport(r.o, modelled, produced, p.latencies, elapsed, inv)
	produced.Nodes = p.nodes
	rep.differ = diverge(produced, modelled)
	rep.gpuLatency, rep.cpuLatency = quantiles(p.gpuLatencies), quantiles(p.cpuLatencies)
	return rep, nil
}
