package benchrun

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gpushare/gpushare/test/e2e/framework"
)

func TestFlagsRegister(t *testing.T) {
	tests := []struct {
		name  string
		usage Usage
		args  []string
		want  Flags
		// wantNames are the flags registered, in flag.VisitAll's (sorted) order.
		wantNames []string
	}{
		{name: "all", usage: Usage{Dir: "d", Extender: "e", ExtenderArgs: "a", SchedulerConfig: "s"},
			args:      []string{"--dir=/x", "--extender=bin/ext", "--extender-args=--v=4 --policy=spread", "--scheduler-config=c.yaml"},
			want:      Flags{Dir: "/x", Extender: "bin/ext", ExtenderArgs: "--v=4 --policy=spread", SchedulerConfig: "c.yaml"},
			wantNames: []string{"dir", "extender", "extender-args", "scheduler-config"}},
		{name: "defaults kept", usage: Usage{Dir: "d", Extender: "e"},
			want: Flags{Dir: "keep"}, wantNames: []string{"dir", "extender"}},
		{name: "only those with a help", usage: Usage{Dir: "d", Extender: "e", SchedulerConfig: "s"},
			args:      []string{"--scheduler-config=c.yaml"},
			want:      Flags{Dir: "keep", SchedulerConfig: "c.yaml"},
			wantNames: []string{"dir", "extender", "scheduler-config"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet(tt.name, flag.ContinueOnError)
			f := Flags{Dir: "keep"} // a default Register keeps unless the flag is given
			f.Register(fs, tt.usage)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, f); diff != "" {
				t.Errorf("flags (-want,+got):\n%s", diff)
			}
			var names []string
			fs.VisitAll(func(fl *flag.Flag) { names = append(names, fl.Name) })
			if diff := cmp.Diff(tt.wantNames, names); diff != "" {
				t.Errorf("registered (-want,+got):\n%s", diff)
			}
		})
	}
}

// reportText is a report that prints its text, or fails.
type reportText string

func (r reportText) Write(w io.Writer) error {
	if r == "fail" {
		return errWrite
	}
	_, err := io.WriteString(w, string(r))
	return err
}

var (
	errCheck   = errors.New("bad flag")
	errMeasure = errors.New("invariant check failed")
	errWrite   = errors.New("stdout closed")
	errBuild   = errors.New("build failed")
)

// TestBenchRun checks the order of a benchmark's steps: the check before the workspace, the
// report printed even when the measurement fails after it, the workspace always cleaned up.
func TestBenchRun(t *testing.T) {
	tests := []struct {
		name      string
		check     error
		workspace error
		report    Report
		measure   error
		wantErr   error
		wantOut   string
		// wantSteps are what ran: "workspace", "measure", "cleanup".
		wantSteps []string
	}{
		{name: "report", report: reportText("table\n{}\n"), wantOut: "table\n{}\n",
			wantSteps: []string{"workspace", "measure", "cleanup"}},
		{name: "check fails first", check: errCheck, wantErr: errCheck},
		{name: "workspace fails", workspace: errBuild, wantErr: errBuild, wantSteps: []string{"workspace"}},
		{name: "measurement fails", measure: errMeasure, wantErr: errMeasure,
			wantSteps: []string{"workspace", "measure", "cleanup"}},
		{name: "report then failure", report: reportText("table\n"), measure: errMeasure, wantErr: errMeasure, wantOut: "table\n",
			wantSteps: []string{"workspace", "measure", "cleanup"}},
		{name: "report not printed", report: reportText("fail"), measure: errMeasure, wantErr: errWrite,
			wantSteps: []string{"workspace", "measure", "cleanup"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var steps []string
			flags := &Flags{Dir: "/runs", Extender: "bin/ext", SchedulerConfig: "s.yaml"}
			b := Bench{Name: "bench", TempPrefix: "gpushare-x-", Flags: flags,
				Check: func() error { return tt.check },
				Measure: func(_ context.Context, env *Env) (Report, error) {
					steps = append(steps, "measure")
					want := framework.Options{Root: "/repo", Bin: "/bin", Dir: "/runs/c1", SchedulerConfig: "s.yaml"}
					got := env.ClusterOptions("c1")
					got.Logf = nil
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("cluster options (-want,+got):\n%s", diff)
					}
					return tt.report, tt.measure
				}}
			newWorkspace := func(dir, prefix, extender string) (*framework.Workspace, error) {
				steps = append(steps, "workspace")
				if dir != "/runs" || prefix != "gpushare-x-" || extender != "bin/ext" {
					t.Errorf("workspace(%q, %q, %q)", dir, prefix, extender)
				}
				return &framework.Workspace{Root: "/repo", Bin: "/bin", Dir: dir, Extender: extender,
					Cleanup: func() { steps = append(steps, "cleanup") }}, tt.workspace
			}
			var out bytes.Buffer
			err := b.run(context.Background(), &out, newWorkspace)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("run = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.wantOut, out.String()); diff != "" {
				t.Errorf("stdout (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantSteps, steps); diff != "" {
				t.Errorf("steps (-want,+got):\n%s", diff)
			}
		})
	}
}
