package framework

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pidsFile lists "name pid" lines in start order; Down stops them in reverse.
const pidsFile = "pids"

// Proc is one process the cluster started. Its output goes to <dir>/<name>.log.
type Proc struct {
	Name     string
	LogPath  string
	cmd      *exec.Cmd
	pid      int
	detached bool          // not reaped by us: outlives this program
	done     chan struct{} // closed when a waited process has exited
	err      error         // exit status, valid after done is closed
}

// startProc starts bin with args in its own process group, logging to <dir>/<name>.log, and
// records its PID in <dir>/pids. With wait, a goroutine reaps it so Exited/Stop work; without
// (the demo), the process outlives this program and is stopped later by Down.
func startProc(dir, name, bin string, args []string, env []string, wait bool) (*Proc, error) {
	logPath := filepath.Join(dir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log of %s: %w", name, err)
	}
	defer func() { _ = f.Close() }() // the child has its own copy
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if wait {
		// a test binary killed outright (a CI timeout, a machine stopped mid-run) takes its
		// etcd, apiserver, kubelet... with it instead of leaving them to the next run
		cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s (%s): %w", name, bin, err)
	}
	p := &Proc{Name: name, LogPath: logPath, cmd: cmd, pid: cmd.Process.Pid, detached: !wait, done: make(chan struct{})}
	if wait {
		go func() { p.err = cmd.Wait(); close(p.done) }()
	} else {
		_ = cmd.Process.Release()
	}
	if err := appendPID(dir, name, p.pid); err != nil {
		return p, err
	}
	return p, nil
}

// PID is the process id.
func (p *Proc) PID() int { return p.pid }

// Exited reports whether the process has ended.
func (p *Proc) Exited() bool {
	if p.detached {
		return !alive(p.pid) // an unreaped child that exited is a zombie
	}
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM, waits up to grace, then SIGKILLs.
func (p *Proc) Stop(grace time.Duration) {
	if p.Exited() {
		return
	}
	if p.detached {
		stopPID(p.pid, grace)
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Kill sends SIGKILL and waits for the process to be reaped.
func (p *Proc) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Pause stops the process (SIGSTOP) without ending it: it keeps its sockets but answers
// nothing, as a hung or partitioned server does, until Resume.
func (p *Proc) Pause() error { return syscall.Kill(p.pid, syscall.SIGSTOP) }

// Resume continues a paused process (SIGCONT).
func (p *Proc) Resume() error { return syscall.Kill(p.pid, syscall.SIGCONT) }

// Tail returns the last n lines of the process's log.
func (p *Proc) Tail(n int) string { return TailFile(p.LogPath, n) }

// TailFile returns the last n lines of a file (a log), or the error reading it.
func TailFile(path string, n int) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func appendPID(dir, name string, pid int) error {
	f, err := os.OpenFile(filepath.Join(dir, pidsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("record pid of %s: %w", name, err)
	}
	if _, err := fmt.Fprintf(f, "%s %d\n", name, pid); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

type pidEntry struct {
	name string
	pid  int
}

func readPIDs(dir string) ([]pidEntry, error) {
	f, err := os.Open(filepath.Join(dir, pidsFile))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var out []pidEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 {
			continue
		}
		pid, err := strconv.Atoi(fields[1])
		if err != nil {
			continue
		}
		out = append(out, pidEntry{fields[0], pid})
	}
	return out, sc.Err()
}

// Down stops, newest first, every process recorded in dir's pid list (by PID, SIGTERM then
// SIGKILL after grace) and removes the list. A PID whose process no longer runs the binary
// that was started under that name is left alone (the PID may have been reused).
func Down(dir string, grace time.Duration, logf func(string, ...any)) error {
	entries, err := readPIDs(dir)
	if errors.Is(err, os.ErrNotExist) {
		logf("nothing to stop in %s", dir)
		return nil
	}
	if err != nil {
		return err
	}
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if !alive(e.pid) {
			continue
		}
		if !ownedBy(dir, e.pid) {
			logf("pid %d (%s) is no longer ours; left alone", e.pid, e.name)
			continue
		}
		stopPID(e.pid, grace)
		logf("stopped %s (pid %d)", e.name, e.pid)
	}
	return os.Remove(filepath.Join(dir, pidsFile))
}

// alive is true while pid exists and is not a zombie.
func alive(pid int) bool {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(raw)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// ownedBy is true when the process runs with dir as its working directory, as every process
// started by startProc does.
func ownedBy(dir string, pid int) bool {
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return false
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	return filepath.Clean(cwd) == filepath.Clean(abs)
}

// stopPID sends SIGTERM, waits up to grace for the process to end, then SIGKILLs it.
func stopPID(pid int, grace time.Duration) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if alive(pid) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// attachedProcs returns the still-running processes recorded in dir, as detached Procs.
func attachedProcs(dir string) ([]*Proc, error) {
	entries, err := readPIDs(dir)
	if err != nil {
		return nil, err
	}
	var out []*Proc
	for _, e := range entries {
		if alive(e.pid) && ownedBy(dir, e.pid) {
			out = append(out, &Proc{Name: e.name, LogPath: filepath.Join(dir, e.name+".log"), pid: e.pid, detached: true, done: make(chan struct{})})
		}
	}
	return out, nil
}
