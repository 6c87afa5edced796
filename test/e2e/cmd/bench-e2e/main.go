// Command bench-e2e measures scheduling throughput on a real control plane: kube-scheduler alone
// (gpu-mem counted as a plain extended resource) against kube-scheduler with the gpushare
// extender and the shipped config/scheduler-config.yaml, in one invocation, RUNS times each,
// every run on a fresh kube-apiserver with NODES nodes of 8 x 16 GiB cards and PODS pods of
// 1-8 GiB created by 16 goroutines. It prints a table; its last line is one JSON object.
//
// With --replicas N (N >= 2) the extender's runs start N replicas with leader election (only
// the leader binds; the others answer filter and prioritize and refuse binds) behind a front,
// as a Deployment behind a Service: --front request sends each call to the next ready replica
// (framework.RoundRobin), --front request-leader each call to the replica whose /readyz/leader
// answers 200 (a front that checks its backends itself), --front connection each TCP
// connection (framework.ConnFront, as kube-proxy does). The report then says, per replica,
// what it bound and refused. With --fence the extender's runs install its RBAC and admission
// policies (the fence among them) and act as its service account, to measure what they cost.
//
//	bench-e2e [--nodes 1000] [--pods 5000] [--runs 3] [--scheduler-qps 0] [--create-qps 0]
//	          [--replicas 1] [--front request|request-leader|connection] [--handover] [--extender-only] [--fence]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
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
	// replicas is the number of extender replicas of the extender's runs.
	replicas int
	// front is how the replicas are balanced: frontRequest, frontRequestLeader or
	// frontConnection; frontSet says that --front was given (then even one replica is reached
	// through the front).
	front    string
	frontSet bool
	// handover: before the burst the leader is stopped (it releases the Lease), another replica
	// takes over and the stopped one starts again, as a follower, on its port.
	handover bool
	// extenderOnly skips kube-scheduler alone's runs: for comparing extender setups, each
	// invocation then takes a third of the time.
	extenderOnly bool
	// fence: the extender's runs install its RBAC and admission policies (the fence among them)
	// and run the replicas as its service account, so that every Binding is checked.
	fence bool
}

// The fronts of --front.
const (
	frontRequest    = "request"
	frontConnection = "connection"
	// frontRequestLeader is frontRequest checking /readyz/leader, as a front that checks its
	// backends' health itself is configured to: the calls go to the leader alone.
	frontRequestLeader = "request-leader"
	// frontNone is reported when kube-scheduler calls the one replica directly.
	frontNone = "none"
)

// maxReplicas bounds --replicas: replica i is named by the letter letters[i].
const maxReplicas = len(letters)

// frontUsed is the front of the extender's runs: none for one replica unless --front was given.
func (o options) frontUsed() string {
	if o.replicas == 1 && !o.frontSet {
		return frontNone
	}
	return o.front
}

func main() {
	o := options{nodes: 1000, pods: 5000, runs: 3, stall: 2 * time.Minute, replicas: 1, front: frontRequest}
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
	flag.IntVar(&o.replicas, "replicas", o.replicas, "extender replicas of the extender's runs; 2 or more run with leader election (only the leader binds) behind --front")
	flag.StringVar(&o.front, "front", o.front, "how kube-scheduler reaches the replicas: request (each call to the next ready replica), request-leader (each call to the next replica whose /readyz/leader answers 200: the leader) or connection (each TCP connection, as a Service through kube-proxy); given with --replicas 1, the one replica is reached through it too")
	flag.BoolVar(&o.handover, "handover", false, "with --replicas 2 or more: before the burst the leader stops (releasing the Lease), another replica takes over and the stopped one restarts as a follower on its port, so the burst runs after a leadership change")
	flag.BoolVar(&o.extenderOnly, "extender-only", false, "run only the extender's runs, not kube-scheduler alone's (to compare extender setups, e.g. --replicas 1 against 2)")
	flag.BoolVar(&o.fence, "fence", false, "the extender's runs install config/extender/rbac.yaml and config/admission/extender-*.yaml and run the replicas as the extender's service account: every Binding and placement write goes through the admission policies, the fence among them (to measure their cost)")
	flag.Parse()
	flag.Visit(func(f *flag.Flag) { o.frontSet = o.frontSet || f.Name == "front" })
	benchrun.Main("bench-e2e", func(ctx context.Context) error { return run(ctx, o) })
}

// logf writes one log line of the command.
func logf(format string, args ...any) { benchrun.Logger("bench")(format, args...) }

func run(ctx context.Context, o options) error {
	if o.nodes < 1 || o.pods < 1 || o.runs < 1 {
		return fmt.Errorf("--nodes, --pods and --runs must be positive")
	}
	if o.replicas < 1 || o.replicas > maxReplicas {
		return fmt.Errorf("--replicas must be between 1 and %d", maxReplicas)
	}
	if o.fence && o.replicas < 2 {
		return fmt.Errorf("--fence needs --replicas 2 or more: the fence is the leader's Lease")
	}
	if o.front != frontRequest && o.front != frontConnection && o.front != frontRequestLeader {
		return fmt.Errorf("--front must be %s, %s or %s, not %q", frontRequest, frontRequestLeader, frontConnection, o.front)
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
	rep := report{Nodes: o.nodes, Pods: o.pods, Replicas: o.replicas, Front: o.frontUsed(), Fence: o.fence}
	modes := []mode{{name: modeAlone, config: alone}, {name: modeExtender, config: o.schedulerConfig, extender: ext}}
	if o.extenderOnly {
		modes = modes[1:]
	}
	for i := range o.runs {
		for _, m := range modes {
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
