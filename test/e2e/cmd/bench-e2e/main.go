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
// With --dra the runs are DRA mode's (dra.go): ResourceSlices and claims instead of gpu-mem,
// the extender's runs with --dra-mode behind config/dra/scheduler-config.yaml.
//
//	bench-e2e [--nodes 1000] [--pods 5000] [--runs 3] [--scheduler-qps 0] [--create-qps 0]
//	          [--replicas 1] [--front request|request-leader|connection] [--handover] [--extender-only] [--fence] [--dra]
package main

import (
	"context"
	"flag"
	"time"

	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
)

func main() {
	o := options{nodes: 1000, pods: 5000, runs: 3, stall: 2 * time.Minute, replicas: 1, front: frontRequest}
	flag.IntVar(&o.nodes, "nodes", o.nodes, "nodes of 8 x 16 GiB cards")
	flag.IntVar(&o.pods, "pods", o.pods, "pods of 1-8 GiB, created by 16 goroutines")
	flag.IntVar(&o.runs, "runs", o.runs, "runs of each mode")
	flag.Float64Var(&o.schedulerQPS, "scheduler-qps", 0, "kube-scheduler's client QPS (0: kube-scheduler's default)")
	flag.IntVar(&o.schedulerBurst, "scheduler-burst", 0, "kube-scheduler's client burst (0: kube-scheduler's default)")
	flag.DurationVar(&o.stall, "stall", o.stall, "a run that binds nothing for this long has stalled and ends")
	flag.StringVar(&o.profile, "cpu-profile", "", "folder for 20-s CPU profiles of kube-apiserver (every run) and of the extender (extender runs), from the first pod on")
	flag.Float64Var(&o.createQPS, "create-qps", 0, "client QPS of the 16 goroutines creating the pods, burst twice that (0: no limit, the pods arrive as fast as kube-apiserver takes them and the run measures each mode's capacity; 200: they arrive at about 200 per second)")
	flag.IntVar(&o.replicas, "replicas", o.replicas, "extender replicas of the extender's runs; 2 or more run with leader election (only the leader binds) behind --front")
	flag.StringVar(&o.front, "front", o.front, "how kube-scheduler reaches the replicas: request (each call to the next ready replica), request-leader (each call to the next replica whose /readyz/leader answers 200: the leader) or connection (each TCP connection, as a Service through kube-proxy); given with --replicas 1, the one replica is reached through it too")
	flag.BoolVar(&o.handover, "handover", false, "with --replicas 2 or more: before the burst the leader stops (releasing the Lease), another replica takes over and the stopped one restarts as a follower on its port, so the burst runs after a leadership change")
	flag.BoolVar(&o.extenderOnly, "extender-only", false, "run only the extender's runs, not kube-scheduler alone's (to compare extender setups, e.g. --replicas 1 against 2)")
	flag.BoolVar(&o.dra, "dra", false, "DRA mode (docs/dra.md): each node publishes its cards in a ResourceSlice instead of gpu-mem, each pod is created in the claim form DRA mode's webhook gives it, kube-controller-manager makes the claims (with --scheduler-qps/--scheduler-burst as its client limits when set), kube-scheduler's allocator picks the card and binds; the extender's runs add the extender with --dra-mode behind config/dra/scheduler-config.yaml (unless --scheduler-config)")
	flag.BoolVar(&o.fence, "fence", false, "the extender's runs install config/extender/rbac.yaml and config/admission/extender-*.yaml and run the replicas as the extender's service account: every Binding and placement write goes through the admission policies, the fence among them (to measure their cost)")
	benchrun.Bench{
		Name: "bench-e2e", TempPrefix: "gpushare-bench-", Logf: logf, Flags: &o.Flags,
		Usage: benchrun.Usage{
			Dir:             "folder for the clusters' data and logs (default: a temporary folder, removed)",
			Extender:        "extender binary (default: built from this checkout)",
			ExtenderArgs:    "more flags for the extender, separated by spaces (e.g. --filter-chooses-node=false)",
			SchedulerConfig: "KubeSchedulerConfiguration of the extender's runs (default: the shipped config/scheduler-config.yaml); kube-scheduler alone runs with its defaults",
		},
		Check: func() error {
			flag.Visit(func(f *flag.Flag) { o.frontSet = o.frontSet || f.Name == "front" })
			return o.check()
		},
		Measure: func(ctx context.Context, env *benchrun.Env) (benchrun.Report, error) { return measure(ctx, env, o) },
	}.Main()
}

// logf writes one log line of the command.
func logf(format string, args ...any) { benchrun.Logger("bench")(format, args...) }
