// Command bench-replay measures placement in production: it replays the simulator's exact
// submission sequence of an openb trace (github.com/alibaba/clusterdata, cluster-trace-gpu-v2023)
// through a real kube-apiserver and kube-scheduler running the shipped
// config/scheduler-config.yaml with the gpushare extender, one pod at a time (each placed once or
// rejected, the FGD paper's protocol), and compares the allocation with the simulator's for the
// same trace, policy and seed. With --dra it replays the sequence under Dynamic Resource
// Allocation instead: kube-scheduler alone places each pod's claims on the cards of the nodes'
// ResourceSlices, and the allocation is compared with the simulator's --dra kube-index. It
// prints a table; its last line is one JSON object.
//
//	bench-replay --trace-dir ../shared/traces/openb-2023 [--trace default] [--policy fgd-online] [--seed 42] [--dra]
package main

import (
	"flag"
	"fmt"

	"github.com/gpushare/gpushare/pkg/placement/policies"
	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
)

// options is the command line.
type options struct {
	// Flags are --dir, --extender and --scheduler-config.
	benchrun.Flags
	traceDir, trace, policy string
	seed                    int
	inflate                 float64
	taintGPUNodes           bool
	// dra replays under Dynamic Resource Allocation: kube-scheduler alone, each node's cards
	// in a ResourceSlice, each gpu-mem pod converted to claims (dra.go).
	dra bool
	// clientQPS is kube-scheduler's and kube-controller-manager's client QPS with dra (burst
	// twice it); 0 keeps their defaults.
	clientQPS float64
}

func main() {
	r := &replay{registry: policies.NewRegistry(), o: options{trace: "default", policy: policies.Default, seed: 42, inflate: 1.3, clientQPS: 1000}}
	o := &r.o
	flag.StringVar(&o.traceDir, "trace-dir", o.traceDir, "folder of the openb CSVs (openb_node_list_gpu_node.csv, openb_pod_list_<trace>.csv)")
	flag.StringVar(&o.trace, "trace", o.trace, "trace name: default, gpushare40, gpushare100, multigpu50, gpuspec33, ...")
	flag.StringVar(&o.policy, "policy", o.policy, fmt.Sprintf("placement policy, one of %v", r.registry.Names()))
	flag.IntVar(&o.seed, "seed", o.seed, "the simulator's seed: the submission sequence")
	flag.Float64Var(&o.inflate, "inflate", o.inflate, "total GPU request submitted, as a multiple of GPU capacity")
	flag.BoolVar(&o.taintGPUNodes, "taint-gpu-nodes", false, "taint every node so that only pods asking gpu-mem go there (pods without gpu-mem are then rejected: every openb node has GPUs)")
	flag.BoolVar(&o.dra, "dra", false, "replay under DRA: kube-scheduler alone (no extender), each node's cards published in a ResourceSlice as share-plugin --mode=dra does, each gpu-mem pod converted to claims as the DRA webhook does; compared with the simulator's --dra kube-index")
	flag.Float64Var(&o.clientQPS, "client-qps", o.clientQPS, "with --dra: client QPS of kube-scheduler and kube-controller-manager (burst twice it); 0 keeps their defaults (50 and 20)")
	benchrun.Bench{
		Name: "bench-replay", TempPrefix: "gpushare-replay-", Logf: logf, Flags: &o.Flags,
		Usage: benchrun.Usage{
			Dir:             "cluster folder (logs, data); default a temporary folder, removed at the end",
			Extender:        "extender binary to run (default: built from this checkout; none with --dra)",
			SchedulerConfig: "KubeSchedulerConfiguration to run kube-scheduler with (default: the shipped config/scheduler-config.yaml; with --dra, kube-scheduler's defaults without extenders)",
		},
		Check: r.check, Measure: r.measure,
	}.Main()
}

// logf writes one log line of the command.
func logf(format string, args ...any) { benchrun.Logger("replay")(format, args...) }
