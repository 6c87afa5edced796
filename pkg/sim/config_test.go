package sim

import (
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/placement/policies"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Config)
		wantErr string // "" for valid
	}{
		{name: "defaults with trace files", change: func(*Config) {}},
		{name: "production's tie order", change: func(c *Config) { c.TieOrder = TieOrderExtender }},
		{name: "unknown tie order", change: func(c *Config) { c.TieOrder = "random" }, wantErr: `--tie-order must be seeded or extender, not "random"`},
		{name: "no trace", change: func(c *Config) { c.NodesFile = "" }, wantErr: "--nodes and --pods are required"},
		{name: "unknown policy", change: func(c *Config) { c.Policies = []string{"fastest"} }, wantErr: `unknown policy "fastest"`},
		{name: "sampling every node", change: func(c *Config) { c.SampleNodes, c.PercentageOfNodesToScore = true, 100 }},
		{name: "percentage over 100", change: func(c *Config) { c.PercentageOfNodesToScore = 101 }, wantErr: "--percentage-of-nodes-to-score must be 0..100, not 101"},
		{name: "negative percentage", change: func(c *Config) { c.PercentageOfNodesToScore = -1 }, wantErr: "must be 0..100"},
		{name: "no seeds", change: func(c *Config) { c.Seeds = nil }, wantErr: "must be positive"},
		{name: "synthetic topology", change: func(c *Config) { c.Topology = TopologySynthetic }},
		{name: "synthetic topology for the report only", change: func(c *Config) { c.Topology = TopologySyntheticBlind }},
		{name: "unknown topology", change: func(c *Config) { c.Topology = "dgx" }, wantErr: `--topology must be none, synthetic or synthetic-blind, not "dgx"`},
		{name: "preemption", change: func(c *Config) { c.Preemption = true }},
		{name: "preemption with a topology", change: func(c *Config) { c.Preemption, c.Topology = true, TopologySynthetic }, wantErr: "--preemption is for runs without --topology"},
		{name: "DRA variants", change: func(c *Config) { c.DRA = []*DRA{nil, {Node: DRANodeKube, Order: CardOrderIndex}} }},
		{name: "DRA with preemption", change: func(c *Config) { c.DRA, c.Preemption = []*DRA{nil}, true }, wantErr: "--dra is for runs without --preemption"},
		{name: "DRA with a topology", change: func(c *Config) { c.DRA, c.Topology = []*DRA{nil}, TopologySynthetic }, wantErr: "--dra is for runs without"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			c.NodesFile, c.PodsFile = "nodes.csv", "pods.csv"
			tt.change(&c)
			err := c.Validate(policies.NewRegistry())
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrBadConfig) {
				t.Fatalf("Validate() = %v, want an ErrBadConfig containing %q", err, tt.wantErr)
			}
		})
	}
}

// TestProductionFlag: --production sets every option of the simulator's model of production.
func TestProductionFlag(t *testing.T) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	c.AddFlags(fs, policies.NewRegistry())
	if err := fs.Parse([]string{"--production", "--percentage-of-nodes-to-score=30"}); err != nil {
		t.Fatal(err)
	}
	type model struct {
		TieOrder                            string
		SampleNodes, LearnAtBind, SyncNodes bool
		PercentageOfNodesToScore            int
	}
	got := model{c.TieOrder, c.SampleNodes, c.LearnAtBind, c.SyncNodes, c.PercentageOfNodesToScore}
	want := model{TieOrderExtender, true, true, true, 30}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config after --production (-want,+got):\n%s", diff)
	}
	var r Run
	r.ModelProduction(30)
	if gotRun := (model{map[bool]string{true: TieOrderExtender}[r.ExtenderTieOrder], r.SampleNodes, r.LearnAtBind, r.SyncNodes, r.PercentageOfNodesToScore}); gotRun != want {
		t.Errorf("Run.ModelProduction(30) = %+v, want %+v", gotRun, want)
	}
}

// TestDRAFlag: --dra reads a list of variants, "off" as nil, and refuses an unknown one.
func TestDRAFlag(t *testing.T) {
	c := DefaultConfig()
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	c.AddFlags(fs, policies.NewRegistry())
	if err := fs.Parse([]string{"--dra", "off, tightest,naive-index,kube-emptiest"}); err != nil {
		t.Fatal(err)
	}
	want := []*DRA{nil, {Node: DRANodePredict, Order: CardOrderTightest}, {Node: DRANodeNaive, Order: CardOrderIndex}, {Node: DRANodeKube, Order: CardOrderEmptiest}}
	if diff := cmp.Diff(want, c.DRA); diff != "" {
		t.Errorf("DRA after --dra (-want,+got):\n%s", diff)
	}
	fs = flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.AddFlags(fs, policies.NewRegistry())
	if err := fs.Parse([]string{"--dra", "index,best"}); err == nil || !strings.Contains(err.Error(), `"best"`) {
		t.Errorf("--dra index,best: %v, want an error naming best", err)
	}
}
