package framework

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"time"
)

// Workspace is what a benchmark command needs to start clusters: the repository, the pinned
// Kubernetes binaries, a folder for the clusters, and the extender binary to run.
type Workspace struct {
	Root, Bin, Dir, Extender string
	// Cleanup removes Dir when the workspace made it.
	Cleanup func()
}

// NewWorkspace finds the repository, builds the pinned binaries if absent, uses dir (made if
// missing; a new temporary folder named after prefix when empty) and builds the extender there unless extender
// names a binary already built.
func NewWorkspace(dir, prefix, extender string) (*Workspace, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	bin, err := EnsureBins(root)
	if err != nil {
		return nil, err
	}
	w := &Workspace{Root: root, Bin: bin, Dir: dir, Extender: extender, Cleanup: func() {}}
	if w.Dir == "" {
		if w.Dir, err = os.MkdirTemp("", prefix); err != nil {
			return nil, err
		}
		w.Cleanup = func() { _ = os.RemoveAll(w.Dir) }
	} else if err := os.MkdirAll(w.Dir, 0o755); err != nil { // a folder given but not there yet
		return nil, err
	}
	if w.Extender == "" {
		if w.Extender, err = BuildGpushare(root, w.Dir, "extender"); err != nil {
			w.Cleanup()
			return nil, err
		}
	}
	return w, nil
}

// Percentile is the q-quantile of ds (nearest rank), 0 when empty.
func Percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// Printer prints to W until the first error, which it keeps in Err.
type Printer struct {
	W   io.Writer
	Err error
}

// Printf prints unless an earlier print failed.
func (p *Printer) Printf(format string, args ...any) {
	if p.Err == nil {
		_, p.Err = fmt.Fprintf(p.W, format, args...)
	}
}

// Finish ends a report: the first print error, else flush (the table's writer), then v as one
// line of JSON on w.
func (p *Printer) Finish(flush func() error, w io.Writer, v any) error {
	if p.Err != nil {
		return p.Err
	}
	if err := flush(); err != nil {
		return err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", raw)
	return err
}
