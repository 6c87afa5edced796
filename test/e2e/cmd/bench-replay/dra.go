package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/dra"
	"github.com/gpushare/gpushare/pkg/draconvert"
	"github.com/gpushare/gpushare/pkg/sim"
	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// draDriver is the DRA driver whose devices the replay publishes: share-plugin --mode=dra's
// default name, which is also the DeviceClass config/dra/deviceclass.yaml ships and the one
// draconvert's default claims ask.
const draDriver = dra.DefaultDriverName

// draDeviceClassFile is the shipped DeviceClass, relative to the repository's root.
const draDeviceClassFile = "config/dra/deviceclass.yaml"

// draNoExtender stands in for the extender binary with --dra, where none runs, so that the
// workspace builds none.
const draNoExtender = "none (--dra: kube-scheduler alone)"

// schedulerAloneConfig is kube-scheduler's configuration with --dra: its defaults, without
// extenders (adaptive percentageOfNodesToScore), as a managed control plane runs it.
const schedulerAloneConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
`

// checkDRA checks the flags that --dra changes the meaning of; with --dra no extender is built.
func (r *replay) checkDRA() error {
	o := &r.o
	switch {
	case !o.dra:
		return nil
	case o.taintGPUNodes:
		return fmt.Errorf("--taint-gpu-nodes is for the device-plugin mode, not --dra")
	case o.Extender != "":
		return fmt.Errorf("--extender: no extender runs with --dra")
	case o.clientQPS < 0:
		return fmt.Errorf("--client-qps must not be negative")
	}
	o.Extender = draNoExtender
	return nil
}

// measureDRA runs the simulator's --dra kube-index on the sequence, then production under DRA,
// and compares them.
func (r *replay) measureDRA(ctx context.Context, env *benchrun.Env) (benchrun.Report, error) {
	modelled, err := r.simulateKubeIndex()
	if err != nil {
		return nil, err
	}
	rep, err := r.produceDRA(ctx, env, modelled)
	if err != nil {
		return nil, err
	}
	if !rep.check.ok() {
		return rep, fmt.Errorf("invariant check failed: %s", rep.check)
	}
	return rep, nil
}

// simulateKubeIndex runs the simulator as kube-scheduler v1.37.1 alone places the sequence
// under DRA, the driver publishing the cards by index (gpushare-sim --dra kube-index).
func (r *replay) simulateKubeIndex() (*sim.Result, error) {
	run, err := r.newRun()
	if err != nil {
		return nil, err
	}
	run.DRA = &sim.DRA{Node: sim.DRANodeKube, Order: sim.CardOrderIndex}
	res, err := run.Execute()
	if err != nil {
		return nil, fmt.Errorf("simulator: %w", err)
	}
	logf("simulator, %s: %d of %d pods placed, %.2f %% allocated at 100 %% arrived", run.DRA, res.Placed, res.Submitted, res.AllocAt(100))
	return res, nil
}

// draClusterOptions are the cluster's options with --dra: kube-scheduler without extenders
// unless --scheduler-config names a configuration, and --client-qps.
func (r *replay) draClusterOptions(env *benchrun.Env) (framework.Options, error) {
	opts := env.ClusterOptions("cluster")
	if opts.SchedulerConfig == "" {
		path := filepath.Join(env.Dir, "kube-scheduler-dra.yaml")
		if err := os.WriteFile(path, []byte(schedulerAloneConfig), 0o600); err != nil {
			return opts, fmt.Errorf("kube-scheduler configuration: %w", err)
		}
		opts.SchedulerConfig = path
	}
	if q := r.o.clientQPS; q > 0 {
		opts.SchedulerQPS, opts.SchedulerBurst = q, int(2*q)
	}
	return opts, nil
}

// produceDRA replays the sequence on a real control plane under DRA and reports it against the
// simulator's kube-index.
func (r *replay) produceDRA(ctx context.Context, env *benchrun.Env, modelled *sim.Result) (*draReport, error) {
	opts, err := r.draClusterOptions(env)
	if err != nil {
		return nil, err
	}
	p, err := startDRAProduction(ctx, opts, r.o.clientQPS)
	if err != nil {
		return nil, err
	}
	defer p.cluster.Stop()
	t0 := time.Now()
	if err := p.addDRANodes(ctx, r.nodes); err != nil {
		return nil, err
	}
	setup := time.Since(t0)
	run, err := r.newRun()
	if err != nil {
		return nil, err
	}
	p.expected = modelled.Nodes
	start := time.Now()
	produced, err := run.ExecuteOn(p.submitter(ctx))
	if err != nil {
		return nil, fmt.Errorf("production: %w", err)
	}
	elapsed := time.Since(start)
	check, err := p.checkDRA(ctx)
	if err != nil {
		return nil, err
	}
	produced.Nodes = p.nodes
	return newDRAReport(r.o, modelled, produced, p, check, [2]time.Duration{setup, elapsed}), nil
}

// startDRAProduction starts etcd, kube-apiserver, kube-controller-manager (its resource claim
// controller makes each pod's claims from their templates) and kube-scheduler with opts'
// configuration, applies the shipped DeviceClass and watches the replayed pods, which it
// converts as DRA mode's webhook does.
func startDRAProduction(ctx context.Context, opts framework.Options, clientQPS float64) (*production, error) {
	c, err := benchrun.StartCluster(ctx, opts, namespace)
	if err != nil {
		return nil, err
	}
	p := &production{cluster: c, names: contract.DefaultNames()}
	if err := p.startDRA(ctx, clientQPS); err != nil {
		c.Stop()
		return nil, err
	}
	return p, nil
}

func (p *production) startDRA(ctx context.Context, clientQPS float64) error {
	c := p.cluster
	var kcm []string
	if clientQPS > 0 {
		kcm = []string{"--kube-api-qps=" + strconv.FormatFloat(clientQPS, 'f', -1, 64), "--kube-api-burst=" + strconv.Itoa(int(2*clientQPS))}
	}
	if err := c.StartControllerManager(kcm...); err != nil {
		return err
	}
	if err := c.Apply(ctx, filepath.Join(c.Root, draDeviceClassFile)); err != nil {
		return err
	}
	if err := c.StartScheduler(""); err != nil {
		return err
	}
	p.convert = newConverter(c.Client, draconvert.DefaultConfig(p.names)).convert
	p.watch = newOutcomes()
	return benchrun.WatchPods(ctx, c.Client, namespace, p.watch.observe)
}
