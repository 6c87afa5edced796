package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"

	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// stderrTail is how much of a workload's stderr is kept for the report.
const stderrTail = 4096

// process is a started workload: its lines, as they come, and the end of its output.
type process struct {
	name  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	// keys receives the key of every GPUCHECK line, and is closed when stdout ends.
	keys chan string

	mu     sync.Mutex
	report workloadReport // guarded by mu
	stderr tailBuffer     // guarded by its own lock
}

// startProcess starts cmd (its stdio must be unset) and reads its lines.
func startProcess(ctx context.Context, name string, cmd *exec.Cmd) (*process, error) {
	p := &process{name: name, cmd: cmd, keys: make(chan string, 256), report: workloadReport{}}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	cmd.Stderr = &p.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.stdin = stdin
	klog.FromContext(ctx).V(2).Info("Started workload", "container", name, "pid", cmd.Process.Pid, "argv", cmd.Args)
	go p.read(ctx, stdout)
	return p, nil
}

// read keeps the GPUCHECK lines of stdout and passes their keys on.
func (p *process) read(ctx context.Context, stdout io.Reader) {
	defer close(p.keys)
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		k, v, ok := parseLine(sc.Text())
		if !ok {
			klog.FromContext(ctx).V(4).Info("Workload output", "container", p.name, "line", sc.Text())
			continue
		}
		p.mu.Lock()
		p.report[k] = v
		p.mu.Unlock()
		p.keys <- k
	}
}

// waitFor waits until the workload printed key; false when it ended first, printed
// keyFatal, or ctx ended.
func (p *process) waitFor(ctx context.Context, key string) bool {
	for {
		select {
		case k, ok := <-p.keys:
			switch {
			case !ok || k == keyFatal:
				return false
			case k == key:
				return true
			}
		case <-ctx.Done():
			return false
		}
	}
}

// send writes s to the workload's stdin.
func (p *process) send(s string) {
	_, _ = io.WriteString(p.stdin, s)
}

// finish closes stdin and waits for the workload to exit.
func (p *process) finish() error {
	_ = p.stdin.Close()
	for range p.keys { //nolint:revive // drain: the reader ends with stdout
	}
	if err := p.cmd.Wait(); err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	return nil
}

// snapshot returns a copy of what the workload printed so far.
func (p *process) snapshot() workloadReport {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(workloadReport, len(p.report))
	for k, v := range p.report {
		out[k] = v
	}
	return out
}

// pid is the workload's host PID.
func (p *process) pid() int { return p.cmd.Process.Pid }

// tailBuffer keeps the last stderrTail bytes written to it. Safe for concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

// Write keeps the tail of p.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if n := len(t.buf); n > stderrTail {
		t.buf = append([]byte(nil), t.buf[n-stderrTail:]...)
	}
	return len(p), nil
}

// String returns the kept tail.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// containerEnv is a container's env as a runtime gives it: Allocate's variables, plus the
// named host variables that are set (an image's PATH and HOME; passEnv).
func containerEnv(envs map[string]string, passEnv []string, lookup func(string) (string, bool)) []string {
	out := make([]string, 0, len(envs)+len(passEnv))
	for k, v := range envs {
		out = append(out, k+"="+v)
	}
	for _, k := range passEnv {
		if _, given := envs[k]; given {
			continue
		}
		if v, ok := lookup(k); ok {
			out = append(out, k+"="+v)
		}
	}
	sort.Strings(out)
	return out
}

// containerMounts converts Allocate's mounts.
func containerMounts(ms []*pluginapi.Mount) []mountSpec {
	out := make([]mountSpec, 0, len(ms))
	for _, m := range ms {
		out = append(out, mountSpec{HostPath: m.GetHostPath(), ContainerPath: m.GetContainerPath(), ReadOnly: m.GetReadOnly()})
	}
	return out
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// osLookupEnv is os.LookupEnv (a func value for containerEnv).
func osLookupEnv(k string) (string, bool) { return os.LookupEnv(k) }
