package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/gpushare/gpushare/test/e2e/framework"
)

// suite holds what every test shares: paths and our binaries, built once in TestMain.
type suite struct {
	root     string
	bin      string // hack/e2e-bins.sh output
	extender string // our cmd/extender
	work     string // our binaries
}

// the suite is read-only after TestMain.
var s suite

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := framework.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	bin, err := framework.EnsureBins(root)
	if err != nil {
		// The only reason to skip: the pinned Kubernetes binaries cannot be built here.
		fmt.Fprintf(os.Stderr, "\n%s\nSKIPPING THE WHOLE E2E SUITE: the real-cluster binaries could not be built:\n  %v\n%s\n\n",
			banner, err, banner)
		return 0
	}
	work, err := os.MkdirTemp("", "gpushare-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() { _ = os.RemoveAll(work) }()
	ext, err := framework.BuildGpushare(root, work, "extender")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	// kubectl finds the plugin on PATH (see env.kubectl)
	if _, err := framework.BuildGpushare(root, work, "kubectl-inspect-gpushare"); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	s = suite{root: root, bin: bin, extender: ext, work: work}
	return m.Run()
}

const banner = "!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!!"

// artifactDir keeps a failed test's logs when E2E_ARTIFACTS is set.
func artifactDir(t *testing.T) string {
	if d := os.Getenv("E2E_ARTIFACTS"); d != "" {
		return filepath.Join(d, t.Name())
	}
	return t.TempDir()
}
