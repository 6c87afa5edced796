package benchrun

import (
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"

	"github.com/gpushare/gpushare/test/e2e/framework"
)

// Bench is the start-up and the end that every benchmark command shares: it parses the command
// line, checks it, makes the workspace (the repository, the pinned binaries, the cluster folder
// and the extender binary), runs the measurement under a context that SIGINT or SIGTERM cancels,
// prints the report on stdout and removes what it made. A command gives its flags and its
// measurement; Main does the rest.
type Bench struct {
	// Name is the command's name, which its error on stderr starts with.
	Name string
	// TempPrefix names the temporary folder made when --dir is not given.
	TempPrefix string
	// Logf writes the command's log lines; the clusters log through it too.
	Logf Logf
	// Flags receive the shared flags that Usage gives a help for; the command registers its
	// own flags on flag.CommandLine before Main.
	Flags *Flags
	Usage Usage
	// Check, when set, checks the parsed command line (and may read what it names) before
	// anything is built or started.
	Check func() error
	// Measure runs the benchmark. The report it returns, when not nil, is printed even when it
	// also returns an error (a failed check after the measurement), which is then returned.
	Measure func(ctx context.Context, env *Env) (Report, error)
}

// Env is what a measurement runs with: the workspace, the shared flags and the command's log.
type Env struct {
	*framework.Workspace
	Flags Flags
	Logf  Logf
}

// ClusterOptions are the options of a cluster in the folder name of the workspace, run with
// --scheduler-config and logging through the command's log.
func (e *Env) ClusterOptions(name string) framework.Options {
	return framework.Options{Root: e.Root, Bin: e.Bin, Dir: filepath.Join(e.Dir, name),
		SchedulerConfig: e.Flags.SchedulerConfig, Logf: e.Logf}
}

// Report is what a benchmark prints on stdout: a table, then its JSON line.
type Report interface {
	Write(w io.Writer) error
}

// ReportFunc is a function that prints a report.
type ReportFunc func(w io.Writer) error

// Write calls f(w).
func (f ReportFunc) Write(w io.Writer) error { return f(w) }

// workspaceFunc makes a workspace: framework.NewWorkspace, or a fake in tests.
type workspaceFunc func(dir, prefix, extender string) (*framework.Workspace, error)

// Main registers the shared flags, parses the command line and runs the benchmark; when it fails
// it prints "<name>: <error>" to stderr and exits 1.
func (b Bench) Main() {
	b.Flags.Register(flag.CommandLine, b.Usage)
	flag.Parse()
	Main(b.Name, func(ctx context.Context) error { return b.run(ctx, os.Stdout, framework.NewWorkspace) })
}

// run checks the command line, makes the workspace with newWorkspace, measures and prints the
// report to stdout; the workspace is cleaned up before it returns.
func (b Bench) run(ctx context.Context, stdout io.Writer, newWorkspace workspaceFunc) error {
	if b.Check != nil {
		if err := b.Check(); err != nil {
			return err
		}
	}
	ws, err := newWorkspace(b.Flags.Dir, b.TempPrefix, b.Flags.Extender)
	if err != nil {
		return err
	}
	defer ws.Cleanup()
	rep, err := b.Measure(ctx, &Env{Workspace: ws, Flags: *b.Flags, Logf: b.Logf})
	if rep != nil {
		if werr := rep.Write(stdout); werr != nil {
			return werr
		}
	}
	return err
}
