package sim

import (
	"os"
	"testing"

	"github.com/gpushare/gpushare/pkg/placement/policies"
)

// BenchmarkOpenB replays one seed of the openb trace named by $GPUSHARE_SIM_NODES and
// $GPUSHARE_SIM_PODS with $GPUSHARE_SIM_POLICY; it is skipped without them.
func BenchmarkOpenB(b *testing.B) {
	nodesFile, podsFile := os.Getenv("GPUSHARE_SIM_NODES"), os.Getenv("GPUSHARE_SIM_PODS")
	if nodesFile == "" || podsFile == "" {
		b.Skip("set GPUSHARE_SIM_NODES and GPUSHARE_SIM_PODS to the openb CSVs")
	}
	nodes, pods, err := LoadTrace(nodesFile, podsFile)
	if err != nil {
		b.Fatal(err)
	}
	name := os.Getenv("GPUSHARE_SIM_POLICY")
	if name == "" {
		name = policies.Default
	}
	for b.Loop() {
		policy, err := policies.NewRegistry().New(name)
		if err != nil {
			b.Fatal(err)
		}
		run := &Run{Nodes: nodes, Pods: pods, Policy: policy, Inflate: 1.3, Seed: 42}
		if _, err := run.Execute(); err != nil {
			b.Fatal(err)
		}
	}
}
