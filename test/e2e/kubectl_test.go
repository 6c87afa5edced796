package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

func execCommand(name string, args ...string) *exec.Cmd { return exec.Command(name, args...) }

// kubectl runs our kubectl against the cluster with s.work (our kubectl plugins) first on PATH.
func (e *env) kubectl(args ...string) (string, error) {
	cmd := exec.CommandContext(e.ctx, filepath.Join(s.bin, "kubectl"), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+e.c.Kubeconfig, "PATH="+s.work+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %v: %w\n%s", args, err, out)
	}
	return string(out), nil
}
