package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/pkg/placement/policies"
	"github.com/gpushare/gpushare/pkg/sim"
)

// TestReplayCheck checks that the command line is refused before anything starts when it is
// wrong, and that the trace it names is read.
func TestReplayCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("openb_node_list_gpu_node.csv", "sn,cpu_milli,memory_mib,gpu,model\nn0,96000,786432,8,V100M32\n")
	write("openb_pod_list_tiny.csv", "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,500\np1,2000,2048,0,0\n")
	valid := options{traceDir: dir, trace: "tiny", policy: policies.Default, seed: 42, inflate: 1.3}
	tests := []struct {
		name    string
		edit    func(o *options)
		wantErr string
		// wantPods are the names of the pods read, when it succeeds.
		wantPods []string
	}{
		{name: "valid", edit: func(*options) {}, wantPods: []string{"p0", "p1"}},
		{name: "no trace folder", edit: func(o *options) { o.traceDir = "" }, wantErr: "--trace-dir is required"},
		{name: "unknown policy", edit: func(o *options) { o.policy = "no-such-policy" }, wantErr: "no-such-policy"},
		{name: "negative seed", edit: func(o *options) { o.seed = -1 }, wantErr: "--seed must be non-negative"},
		{name: "no inflation", edit: func(o *options) { o.inflate = 0 }, wantErr: "--inflate positive"},
		{name: "no such trace", edit: func(o *options) { o.trace = "missing" }, wantErr: "openb_pod_list_missing.csv"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &replay{o: valid, registry: policies.NewRegistry()}
			tt.edit(&r.o)
			err := r.check()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("check = %v, want an error naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var pods []string
			for _, p := range r.pods {
				pods = append(pods, p.Name)
			}
			if diff := cmp.Diff(tt.wantPods, pods); diff != "" {
				t.Errorf("pods read (-want,+got):\n%s", diff)
			}
			if len(r.nodes) != 1 || r.nodes[0].GPUs != 8 {
				t.Errorf("nodes read: %+v", r.nodes)
			}
		})
	}
}

// TestDiverge checks the comparison of production's decisions with the simulator's, pod by pod.
func TestDiverge(t *testing.T) {
	tests := []struct {
		name       string
		production sim.Result
		simulator  sim.Result
		want       divergence
	}{
		{name: "same", production: sim.Result{Nodes: []string{"a", "", "b"}, Decisions: []bool{true, false, true}},
			simulator: sim.Result{Nodes: []string{"a", "", "b"}, Decisions: []bool{true, false, true}},
			want:      divergence{first: -1, firstNode: -1}},
		{name: "other nodes and decisions",
			production: sim.Result{Nodes: []string{"a", "b", "", "c"}, Decisions: []bool{true, true, false, true}},
			simulator:  sim.Result{Nodes: []string{"a", "c", "d", "e"}, Decisions: []bool{true, true, true, true}},
			want:       divergence{onlySimulator: 1, otherNode: 2, first: 2, firstNode: 1}},
		{name: "placed only in production", production: sim.Result{Nodes: []string{"", "x"}, Decisions: []bool{false, true}},
			simulator: sim.Result{Nodes: []string{"", ""}, Decisions: []bool{false, false}},
			want:      divergence{onlyProduction: 1, first: 1, firstNode: -1}},
		{name: "shorter run compared as far as both go", production: sim.Result{Nodes: []string{"a"}, Decisions: []bool{true}},
			simulator: sim.Result{Nodes: []string{"b", "c"}, Decisions: []bool{true, false}},
			want:      divergence{otherNode: 1, first: -1, firstNode: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := diverge(&tt.production, &tt.simulator)
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(divergence{})); diff != "" {
				t.Errorf("diverge (-want,+got):\n%s", diff)
			}
		})
	}
}
