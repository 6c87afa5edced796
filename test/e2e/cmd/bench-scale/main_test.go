package main

import "testing"

// TestOptionsCheck checks the bounds of --nodes, --pods and --calls.
func TestOptionsCheck(t *testing.T) {
	tests := []struct {
		name               string
		nodes, pods, calls int
		wantErr            bool
	}{
		{name: "defaults", nodes: 5000, pods: 50000, calls: 300},
		{name: "no pods", nodes: 1, pods: 0, calls: 1},
		{name: "32 pods per node", nodes: 2, pods: 64, calls: 1},
		{name: "33 pods on a node", nodes: 2, pods: 65, calls: 1, wantErr: true},
		{name: "no nodes", nodes: 0, pods: 0, calls: 1, wantErr: true},
		{name: "negative pods", nodes: 1, pods: -1, calls: 1, wantErr: true},
		{name: "no calls", nodes: 1, pods: 1, calls: 0, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := options{nodes: tt.nodes, pods: tt.pods, calls: tt.calls}
			err := o.check()
			if (err != nil) != tt.wantErr {
				t.Errorf("check = %v, want an error: %t", err, tt.wantErr)
			}
		})
	}
}
