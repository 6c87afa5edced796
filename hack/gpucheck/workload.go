package main

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// workloadSources are the workloads' sources, written into the run's folder at start: the
// binary is all a GPU machine needs. Read-only (embed.FS has no writer).
//
//go:embed workload.py alloc.cu
var workloadSources embed.FS

// Workload kinds (--workload).
const (
	workloadAuto  = "auto"
	workloadTorch = "torch"
	workloadCUDA  = "cuda"
)

// Workload modes, the workload's first argument.
const (
	modeLimits  = "limits"
	modeContext = "context"
	// modeMaxAlloc starts CUDA, waits for "go", then finds the largest allocation that succeeds.
	modeMaxAlloc = "maxalloc"
)

// errNoWorkload is returned when neither PyTorch nor nvcc is usable: nothing can allocate GPU
// memory, so the check cannot run.
var errNoWorkload = errors.New("neither python3 with a CUDA-enabled PyTorch nor nvcc is available")

// workload is how to start the allocating program: argv, without the mode.
type workload struct {
	kind string
	argv []string
}

// command returns the workload's command line in a mode.
func (w workload) command(mode string) []string {
	return append(append([]string(nil), w.argv...), mode)
}

// toolbox runs the programs that prepare a workload (exec.LookPath and exec.Command, or fakes).
type toolbox struct {
	lookPath func(string) (string, error)
	output   func(ctx context.Context, name string, args ...string) ([]byte, error)
}

// realToolbox runs this machine's programs.
func realToolbox() toolbox {
	return toolbox{lookPath: exec.LookPath, output: func(ctx context.Context, name string, args ...string) ([]byte, error) {
		return exec.CommandContext(ctx, name, args...).CombinedOutput() //nolint:gosec // G204: python3 and nvcc with our own arguments
	}}
}

// prepareWorkload picks the workload (kind auto: PyTorch where it sees a GPU, else the CUDA
// program built with nvcc) and writes or builds it into dir.
func prepareWorkload(ctx context.Context, tb toolbox, kind, dir string) (workload, error) {
	var errs []error
	if kind == workloadAuto || kind == workloadTorch {
		w, err := torchWorkload(ctx, tb, dir)
		if err == nil || kind == workloadTorch {
			return w, err
		}
		errs = append(errs, err)
	}
	if kind == workloadAuto || kind == workloadCUDA {
		w, err := cudaWorkload(ctx, tb, dir)
		if err == nil || kind == workloadCUDA {
			return w, err
		}
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		return workload{}, fmt.Errorf("unknown workload %q (want %s, %s or %s)", kind, workloadAuto, workloadTorch, workloadCUDA)
	}
	return workload{}, fmt.Errorf("%w: %w", errNoWorkload, errors.Join(errs...))
}

// torchWorkload writes workload.py and runs it with the interpreter python3 resolves to (so
// that a pyenv shim or a wrapper does not need its own environment in the container).
func torchWorkload(ctx context.Context, tb toolbox, dir string) (workload, error) {
	py, err := tb.lookPath("python3")
	if err != nil {
		return workload{}, fmt.Errorf("python3: %w", err)
	}
	out, err := tb.output(ctx, py, "-c", "import sys, torch; print(sys.executable); sys.exit(0 if torch.cuda.is_available() else 3)")
	if err != nil {
		return workload{}, fmt.Errorf("PyTorch with CUDA (%s): %w: %s", py, err, lastLine(string(out)))
	}
	if exe := firstLine(string(out)); filepath.IsAbs(exe) {
		py = exe
	}
	script, err := writeSource(dir, "workload.py")
	if err != nil {
		return workload{}, err
	}
	return workload{kind: workloadTorch, argv: []string{py, script}}, nil
}

// cudaWorkload builds alloc.cu with nvcc.
func cudaWorkload(ctx context.Context, tb toolbox, dir string) (workload, error) {
	nvcc, err := tb.lookPath("nvcc")
	if err != nil {
		for _, c := range []string{"/usr/local/cuda/bin/nvcc"} {
			if _, statErr := os.Stat(c); statErr == nil {
				nvcc, err = c, nil
			}
		}
		if err != nil {
			return workload{}, fmt.Errorf("nvcc: %w", err)
		}
	}
	src, err := writeSource(dir, "alloc.cu")
	if err != nil {
		return workload{}, err
	}
	bin := filepath.Join(dir, "gpucheck-alloc")
	if out, err := tb.output(ctx, nvcc, "-O2", "-o", bin, src); err != nil {
		return workload{}, fmt.Errorf("nvcc alloc.cu: %w: %s", err, lastLine(string(out)))
	}
	return workload{kind: workloadCUDA, argv: []string{bin}}, nil
}

// writeSource copies an embedded source into dir.
func writeSource(dir, name string) (string, error) {
	data, err := workloadSources.ReadFile(name)
	if err != nil {
		return "", fmt.Errorf("embedded %s: %w", name, err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, data, 0o644); err != nil { //nolint:gosec // G306: read inside the containers
		return "", fmt.Errorf("write %s: %w", name, err)
	}
	return path, nil
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return l
	}
	return "(no output)"
}
