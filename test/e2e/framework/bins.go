package framework

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ErrNoRepo is returned when the repository root cannot be found from the working directory.
var ErrNoRepo = errors.New("gpushare repository root not found")

// Binaries the real cluster needs, built by hack/e2e-bins.sh.
var requiredBins = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok", "kwok-stages.yaml"}

// RepoRoot walks up from the working directory to the folder holding hack/e2e-bins.sh.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hack", "e2e-bins.sh")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", ErrNoRepo
		}
		dir = parent
	}
}

// K8sVersion reads the pinned Kubernetes version from hack/versions.sh.
func K8sVersion(root string) (string, error) {
	f, err := os.Open(filepath.Join(root, "hack", "versions.sh"))
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "K8S_VERSION=${K8S_VERSION:-"); ok {
			return strings.TrimSuffix(v, "}"), nil
		}
	}
	return "", fmt.Errorf("no K8S_VERSION in hack/versions.sh")
}

// BinDir is $E2E_BIN, else <root>/bin/e2e/<k8s version>.
func BinDir(root string) (string, error) {
	if d := os.Getenv("E2E_BIN"); d != "" {
		return d, nil
	}
	v, err := K8sVersion(root)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "bin", "e2e", v), nil
}

// MissingBins lists the required binaries absent from dir.
func MissingBins(dir string) []string {
	var missing []string
	for _, b := range requiredBins {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			missing = append(missing, b)
		}
	}
	return missing
}

// EnsureBins runs hack/e2e-bins.sh when a required binary is missing (its progress lines go to
// stderr) and returns the bin folder.
func EnsureBins(root string) (string, error) {
	dir, err := BinDir(root)
	if err != nil {
		return "", err
	}
	if len(MissingBins(dir)) == 0 {
		return dir, nil
	}
	cmd := exec.Command(filepath.Join(root, "hack", "e2e-bins.sh"))
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.Env = append(os.Environ(), "E2E_BIN="+dir)
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("hack/e2e-bins.sh: %w", err)
	}
	if m := MissingBins(dir); len(m) > 0 {
		return "", fmt.Errorf("still missing after hack/e2e-bins.sh: %v", m)
	}
	return dir, nil
}

// BuildGpushare builds ./cmd/<name> of the main module into outDir (with -trimpath, as the
// Makefile does) and returns the binary's path. Extra args go before the package (e.g. -tags).
func BuildGpushare(root, outDir, name string, extra ...string) (string, error) {
	out := filepath.Join(outDir, name)
	args := append([]string{"build", "-trimpath", "-o", out}, extra...)
	args = append(args, "./cmd/"+name)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/%s: %w\n%s", name, err, msg)
	}
	return out, nil
}
