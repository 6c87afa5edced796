package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// envNSExec, when set, makes a gpucheck process the namespace helper (runNSExec) instead of the
// check: its value is the helper's spec file, or nsExecProbe.
const envNSExec = "GPUCHECK_NSEXEC"

// nsExecProbe makes the helper exit at once: its parent only asks whether a process can start in
// a new mount namespace.
const nsExecProbe = "probe"

// specFile is the helper's spec, in its stage folder.
const specFile = "spec.json"

// mountSpec is one mount of a container, as Allocate returned it.
type mountSpec struct {
	HostPath      string `json:"hostPath"`
	ContainerPath string `json:"containerPath"`
	ReadOnly      bool   `json:"readOnly"`
}

// containerSpec is how the helper starts a workload as a container runtime would: a root made
// of the host's folders with the mounts on top, and exactly Env.
type containerSpec struct {
	// Stage is a host folder of this container alone; the helper mounts its root under it,
	// inside the new namespace, so nothing appears on the host.
	Stage  string      `json:"stage"`
	Mounts []mountSpec `json:"mounts"`
	// Argv is the workload's command; Argv[0] is an absolute path.
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
}

// helperCommand starts this program as the namespace helper in a new, private mount namespace
// (the Go runtime unshares CLONE_NEWNS in the child and marks / MS_REC|MS_PRIVATE, as
// `unshare --mount --propagation private` does), so the helper's mounts never reach the host.
func helperCommand(ctx context.Context, arg string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	cmd := exec.CommandContext(ctx, self) //nolint:gosec // G204: this program itself
	cmd.Env = []string{envNSExec + "=" + arg}
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	cmd.WaitDelay = 10 * time.Second
	return cmd, nil
}

// probeMountNamespace starts the helper in a new mount namespace and waits for it.
func probeMountNamespace(ctx context.Context) error {
	cmd, err := helperCommand(ctx, nsExecProbe)
	if err != nil {
		return err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%w: %s", err, firstLine(string(out)))
	}
	return nil
}

// containerCommand writes spec into its stage folder and returns the command that starts the
// workload as that container; the caller sets its stdio and starts it. The workload keeps the
// helper's PID: the helper execs it.
func containerCommand(ctx context.Context, spec *containerSpec) (*exec.Cmd, error) {
	if len(spec.Argv) == 0 || !filepath.IsAbs(spec.Argv[0]) {
		return nil, fmt.Errorf("workload command %q: want an absolute program path", spec.Argv)
	}
	if err := os.MkdirAll(spec.Stage, 0o700); err != nil {
		return nil, fmt.Errorf("stage folder: %w", err)
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, fmt.Errorf("encode container spec: %w", err)
	}
	path := filepath.Join(spec.Stage, specFile)
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		return nil, fmt.Errorf("write container spec: %w", err)
	}
	return helperCommand(ctx, path)
}
