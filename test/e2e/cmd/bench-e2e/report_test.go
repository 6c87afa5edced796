package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestReportReplicas checks that the report names the replicas and the front in its header and
// its JSON line, and prints each replica's counts.
func TestReportReplicas(t *testing.T) {
	conns := []int{1, 0}
	r := report{Nodes: 10, Pods: 100, Replicas: 2, Front: frontConnection}
	r.add(result{Mode: modeAlone, PodsPerS: 100, P50Ms: 10, P99Ms: 20, bound: 100, cpu: map[string]time.Duration{"kube-scheduler": time.Second}})
	r.add(result{Mode: modeExtender, PodsPerS: 80, P50Ms: 12, P99Ms: 30, bound: 100, cpu: map[string]time.Duration{"extender": time.Second},
		Replicas: []replicaStats{
			{Name: "extender", Leading: true, Binds: 100, Filters: 100, Connections: &conns[0]},
			{Name: "extender-b", Connections: &conns[1]},
		}})
	var out bytes.Buffer
	if err := r.write(&out, options{replicas: 2, front: frontConnection}); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"2 replicas with leader election", "per-connection front", "extender run 1: extender-b"} {
		if !strings.Contains(text, want) {
			t.Errorf("report lacks %q:\n%s", want, text)
		}
	}
	lines := strings.Split(strings.TrimSpace(text), "\n")
	var got struct {
		Replicas int    `json:"replicas"`
		Front    string `json:"front"`
		Runs     []struct {
			Replicas []struct {
				Name        string `json:"name"`
				Binds       int    `json:"binds"`
				Connections *int   `json:"connections"`
			} `json:"replicas"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &got); err != nil {
		t.Fatalf("last line is not JSON: %v\n%s", err, text)
	}
	if got.Replicas != 2 || got.Front != frontConnection || len(got.Runs) != 2 || len(got.Runs[1].Replicas) != 2 ||
		got.Runs[1].Replicas[0].Binds != 100 || got.Runs[1].Replicas[1].Connections == nil || *got.Runs[1].Replicas[1].Connections != 0 {
		t.Errorf("JSON line = %+v", got)
	}
	t.Log("\n" + text)
}

// TestMedianLine checks the report's last table line with and without kube-scheduler alone's
// runs (--extender-only).
func TestMedianLine(t *testing.T) {
	tests := []struct {
		name string
		runs []result
		want string
	}{
		{
			name: "both modes",
			runs: []result{{Mode: modeAlone, PodsPerS: 50, P99Ms: 80000}, {Mode: modeExtender, PodsPerS: 100, P99Ms: 20000}},
			want: "extender 200 % of kube-scheduler alone's pods/s, p99 0.25x",
		},
		{
			name: "extender only, median of three",
			runs: []result{{Mode: modeExtender, PodsPerS: 120, P99Ms: 15000}, {Mode: modeExtender, PodsPerS: 90.5, P99Ms: 30000}, {Mode: modeExtender, PodsPerS: 140, P99Ms: 12000}},
			want: "extender 120.0 pods/s, p99 15000 ms (kube-scheduler alone did not run)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r report
			for _, res := range tt.runs {
				r.add(res)
			}
			if got := r.medianLine(); got != tt.want {
				t.Errorf("medianLine() = %q, want %q", got, tt.want)
			}
		})
	}
}
