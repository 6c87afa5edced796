package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// exitSkip is the exit status of a run that checked nothing (automake's "skipped"): never 0,
// so that a machine without a GPU is not counted as a pass.
const exitSkip = 77

// gpuDevice is the first NVIDIA device node; no GPU, or no driver, when it is missing.
const gpuDevice = "/dev/nvidia0"

// host is what the check needs to know of the machine before it starts; a field per question
// so that tests can answer them.
type host struct {
	// euid is the effective user ID (os.Geteuid).
	euid func() int
	// stat stats a path (os.Stat).
	stat func(string) (os.FileInfo, error)
	// lookPath finds a program on PATH (exec.LookPath).
	lookPath func(string) (string, error)
	// run runs a program and returns its combined output.
	run func(ctx context.Context, name string, args ...string) ([]byte, error)
	// initNVML loads and initializes libnvidia-ml.so.1.
	initNVML func() error
	// mountNamespace starts a process in a new mount namespace and waits for it.
	mountNamespace func(ctx context.Context) error
}

// realHost answers from this machine; initNVML initializes nv.
func realHost(initNVML func() error) host {
	return host{
		euid:     os.Geteuid,
		stat:     os.Stat,
		lookPath: exec.LookPath,
		run: func(ctx context.Context, name string, args ...string) ([]byte, error) {
			return exec.CommandContext(ctx, name, args...).CombinedOutput() //nolint:gosec // G204: fixed programs (nvidia-smi)
		},
		initNVML:       initNVML,
		mountNamespace: probeMountNamespace,
	}
}

// skipReason says why the check cannot run here, or "" when it can. NVML is initialized when
// it returns "".
func (h host) skipReason(ctx context.Context) string {
	if uid := h.euid(); uid != 0 {
		return fmt.Sprintf("not root (uid %d): the check makes mount namespaces and bind mounts, as a container runtime does", uid)
	}
	if _, err := h.stat(gpuDevice); err != nil {
		return fmt.Sprintf("no NVIDIA GPU: %s: %v", gpuDevice, unwrapPath(err))
	}
	if smi, err := h.lookPath("nvidia-smi"); err == nil {
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if out, err := h.run(ctx, smi, "-L"); err != nil {
			return fmt.Sprintf("nvidia-smi -L failed (%v): %s", err, firstLine(string(out)))
		}
	}
	if err := h.initNVML(); err != nil {
		return fmt.Sprintf("NVML unusable (libnvidia-ml.so.1 missing or the driver not loaded): %v", err)
	}
	if err := h.mountNamespace(ctx); err != nil {
		return fmt.Sprintf("cannot start a process in a new mount namespace (unshare(CLONE_NEWNS)): %v", err)
	}
	return ""
}

// preflight prints the skip banner and returns exitSkip when the check cannot run here;
// ok is true when it can.
func preflight(ctx context.Context, h host, w io.Writer) (code int, ok bool) {
	why := h.skipReason(ctx)
	if why == "" {
		return 0, true
	}
	_, _ = fmt.Fprintf(w, "SKIP gpu-check: %s — this is not a pass\n", why)
	return exitSkip, false
}

// unwrapPath drops the operation and path of a *PathError ("no such file or directory").
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// firstLine is the first non-empty line of s.
func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return l
		}
	}
	return "(no output)"
}
