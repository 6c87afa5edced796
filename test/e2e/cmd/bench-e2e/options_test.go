package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
)

// TestOptionsCheck checks that a command line that cannot run is refused before anything starts.
func TestOptionsCheck(t *testing.T) {
	valid := options{nodes: 10, pods: 100, runs: 1, replicas: 1, front: frontRequest}
	tests := []struct {
		name    string
		edit    func(o *options)
		wantErr string
	}{
		{name: "defaults", edit: func(*options) {}},
		{name: "no nodes", edit: func(o *options) { o.nodes = 0 }, wantErr: "must be positive"},
		{name: "no runs", edit: func(o *options) { o.runs = 0 }, wantErr: "must be positive"},
		{name: "no replica", edit: func(o *options) { o.replicas = 0 }, wantErr: "--replicas must be between 1 and 26"},
		{name: "a replica per letter", edit: func(o *options) { o.replicas = 26 }},
		{name: "too many replicas", edit: func(o *options) { o.replicas = 27 }, wantErr: "--replicas must be between 1 and 26"},
		{name: "fence with one replica", edit: func(o *options) { o.fence = true }, wantErr: "--fence needs --replicas 2"},
		{name: "fence with two", edit: func(o *options) { o.fence, o.replicas = true, 2 }},
		{name: "unknown front", edit: func(o *options) { o.front = "dns" }, wantErr: `not "dns"`},
		{name: "leader front", edit: func(o *options) { o.front = frontRequestLeader }},
		{name: "as many pods as surely fit", edit: func(o *options) { o.pods = 10 * 8 * 16 / 2 }},
		{name: "DRA", edit: func(o *options) { o.dra = true }},
		{name: "DRA with two replicas", edit: func(o *options) { o.dra, o.replicas = true, 2 }, wantErr: "--dra runs one extender replica"},
		{name: "DRA with a front", edit: func(o *options) { o.dra, o.frontSet = true, true }, wantErr: "no --replicas or --front"},
		{name: "DRA with a handover", edit: func(o *options) { o.dra, o.handover = true, true }, wantErr: "not --dra"},
		{name: "DRA with the fence", edit: func(o *options) { o.dra, o.fence, o.replicas = true, true, 2 }, wantErr: "--dra runs one extender replica"},
		{name: "more pods than surely fit", edit: func(o *options) { o.pods = 10*8*16/2 + 1 }, wantErr: "use at most 640"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := valid
			tt.edit(&o)
			err := o.check()
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("check = %v, want an error naming %q", err, tt.wantErr)
			}
		})
	}
}

// TestOptionsModes checks which modes a round runs and how each is configured.
func TestOptionsModes(t *testing.T) {
	tests := []struct {
		name string
		o    options
		want []mode
	}{
		{name: "both", o: options{Flags: benchrun.Flags{SchedulerConfig: "ext.yaml"}}, want: []mode{
			{name: modeAlone, config: "alone.yaml"}, {name: modeExtender, config: "ext.yaml", extender: "bin/ext"}}},
		{name: "shipped configuration", o: options{}, want: []mode{
			{name: modeAlone, config: "alone.yaml"}, {name: modeExtender, extender: "bin/ext"}}},
		{name: "extender only", o: options{extenderOnly: true}, want: []mode{{name: modeExtender, extender: "bin/ext"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.o.modes("alone.yaml", "bin/ext"), cmp.AllowUnexported(mode{})); diff != "" {
				t.Errorf("modes (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestFrontUsed checks that one replica is called directly unless --front was given.
func TestFrontUsed(t *testing.T) {
	tests := []struct {
		o    options
		want string
	}{
		{options{replicas: 1, front: frontRequest}, frontNone},
		{options{replicas: 1, front: frontConnection, frontSet: true}, frontConnection},
		{options{replicas: 3, front: frontRequest}, frontRequest},
		{options{replicas: 2, front: frontConnection, frontSet: true}, frontConnection},
	}
	for _, tt := range tests {
		if got := tt.o.frontUsed(); got != tt.want {
			t.Errorf("%+v.frontUsed() = %q, want %q", tt.o, got, tt.want)
		}
	}
}
