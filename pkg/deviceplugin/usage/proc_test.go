package usage

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/gpushare/gpushare/pkg/contract"
)

func TestParseMapsLine(t *testing.T) {
	tests := []struct {
		name, line string
		wantPath   string
		wantID     FileID
		wantOK     bool
	}{
		{name: "a library", line: "7f1c2a000000-7f1c2a022000 r--p 00000000 fe:01 1835041                    /usr/local/gpushare/hami-core/libvgpu.so",
			wantPath: libPath, wantID: FileID{Major: 0xfe, Minor: 1, Inode: 1835041}, wantOK: true},
		{name: "a path with spaces, deleted", line: "7f1c2a000000-7f1c2a022000 r-xp 00001000 103:02 42 /opt/my lib.so (deleted)",
			wantPath: "/opt/my lib.so (deleted)", wantID: FileID{Major: 0x103, Minor: 2, Inode: 42}, wantOK: true},
		{name: "anonymous memory", line: "7ffd1c7e4000-7ffd1c805000 rw-p 00000000 00:00 0"},
		{name: "the stack", line: "7ffd1c7e4000-7ffd1c805000 rw-p 00000000 00:00 0                          [stack]"},
		{name: "garbage", line: "not maps"},
		{name: "bad device", line: "7f1c2a000000-7f1c2a022000 r--p 00000000 zz:01 12 /lib.so"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path, id, ok := parseMapsLine(tt.line)
			if diff := cmp.Diff([]any{tt.wantPath, tt.wantID, tt.wantOK}, []any{path, id, ok}); diff != "" {
				t.Errorf("parseMapsLine (-want,+got):\n%s", diff)
			}
		})
	}
}

func TestLibraryMatches(t *testing.T) {
	known := Library{Path: libPath, IDs: []FileID{{Major: 8, Minor: 1, Inode: 100}}}
	unknown := Library{Path: libPath}
	tests := []struct {
		name string
		lib  Library
		path string
		id   FileID
		want bool
	}{
		{name: "the same file", lib: known, path: libPath, id: FileID{8, 1, 100}, want: true},
		{name: "the same file under another path", lib: known, path: "/other/libvgpu.so", id: FileID{8, 1, 100}, want: true},
		{name: "another file mounted at the path", lib: known, path: libPath, id: FileID{0, 55, 3}},
		{name: "an older install, replaced on the host", lib: known, path: libPath + " (deleted)", id: FileID{8, 1, 99}, want: true},
		{name: "a deleted file of another file system at the path", lib: known, path: libPath + " (deleted)", id: FileID{0, 55, 3}},
		{name: "another library", lib: known, path: "/usr/lib/libcuda.so.1", id: FileID{8, 1, 7}},
		{name: "identity unknown: by path", lib: unknown, path: libPath, id: FileID{0, 55, 3}, want: true},
		{name: "identity unknown: another path", lib: unknown, path: "/tmp/libvgpu.so", id: FileID{8, 1, 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.lib.Matches(tt.path, tt.id); got != tt.want {
				t.Errorf("Matches(%q, %v) = %v, want %v", tt.path, tt.id, got, tt.want)
			}
		})
	}
}

// TestMapsProbe: the library is identified like the kernel shows it, and a process (this test)
// is seen to map it while it does.
func TestMapsProbe(t *testing.T) {
	path := filepath.Join(t.TempDir(), "libvgpu.so")
	if err := os.WriteFile(path, make([]byte, 2*os.Getpagesize()), 0o644); err != nil {
		t.Fatal(err)
	}
	lib, err := IdentifyLibrary(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(lib.IDs) == 0 {
		t.Fatal("no identity")
	}
	probe := MapsProbe{Root: "/proc", Library: lib}
	self := uint32(os.Getpid()) //nolint:gosec // G115: a PID
	if ok, err := probe.Loaded(self); err != nil || ok {
		t.Fatalf("Loaded before mapping = %v, %v; want false", ok, err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	page, err := unix.Mmap(int(f.Fd()), 0, os.Getpagesize(), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := probe.Loaded(self); err != nil || !ok {
		t.Errorf("Loaded while mapped = %v, %v; want true", ok, err)
	}
	if err := unix.Munmap(page); err != nil {
		t.Fatal(err)
	}
	if _, err := probe.Loaded(1 << 30); !errors.Is(err, ErrProcessGone) {
		t.Errorf("Loaded of a missing process: %v, want ErrProcessGone", err)
	}
}

// TestProcKiller kills a real process through its /proc entry: not while its cgroup names
// another container, then for real; and reports it gone afterwards. It needs root and a writable
// cgroup v2 hierarchy to put the process in a pod's cgroup.
func TestProcKiller(t *testing.T) {
	cg := podCgroup(t)
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	pid := uint32(cmd.Process.Pid) //nolint:gosec // G115: a PID
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	k := ProcKiller{Root: "/proc"}
	if err := k.Check(); err != nil {
		t.Errorf("Check() = %v in the host's PID namespace", err)
	}
	if err := k.Kill(pid, Owner{PodUID: uid, ContainerID: strings.Repeat("f", 64)}); !errors.Is(err, ErrOwnerChanged) {
		t.Fatalf("Kill as another container = %v, want ErrOwnerChanged", err)
	}
	select {
	case err := <-exited:
		t.Fatalf("the process died when its owner did not match: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	if err := k.Kill(pid, Owner{PodUID: uid, ContainerID: cid}); err != nil {
		t.Fatalf("Kill = %v", err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("the process ended with %v, want SIGKILL", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the process is still alive")
	}
	if err := k.Kill(pid, Owner{PodUID: uid, ContainerID: cid}); !errors.Is(err, ErrProcessGone) {
		t.Errorf("Kill after exit = %v, want ErrProcessGone", err)
	}
}

// TestPolicingARealProcess runs the whole path on a real process in a pod's cgroup: NVML (mocked)
// lists it on the container's card, its cgroup names the container, its maps lack HAMi-core,
// and it is killed through its /proc entry.
func TestPolicingARealProcess(t *testing.T) {
	cg := podCgroup(t)
	lib := filepath.Join(t.TempDir(), "libvgpu.so")
	if err := os.WriteFile(lib, make([]byte, os.Getpagesize()), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	f.s.cfg.Owners = ProcReader{Root: "/proc"}
	f.s.cfg.MemoryLimit = contract.MemoryLimitHAMiCore
	policy, err := NewProcPolicy("/proc", lib, EscapeActionKill, DefaultContextAllowanceBytes)
	if err != nil {
		t.Fatal(err)
	}
	f.s.cfg.Escapes = policy
	pod := limitedPod("a", cid, 4, 1)
	pod.UID = uid
	f.pods.set(pod)
	f.host.SetUsage(1, 0, []gonvml.ProcessInfo{{Pid: uint32(cmd.Process.Pid), UsedGpuMemory: gib}}) //nolint:gosec // G115: a PID
	if _, err := f.s.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("the process ended with %v, want SIGKILL", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the process without HAMi-core still runs")
	}
	if ev := f.events.list(); len(ev) != 1 || !strings.Contains(ev[0], "without HAMi-core") || !strings.Contains(ev[0], "killed process") {
		t.Errorf("events = %q, want one saying the process ran without HAMi-core and was killed", ev)
	}
}

// podCgroup makes a pod container's cgroup (pod<uid>/<cid>) in the cgroup v2 hierarchy, removed
// at the end; it skips the test where it cannot.
func podCgroup(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to make a cgroup")
	}
	root, err := cgroup2Mount()
	if err != nil {
		t.Skip(err)
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Skip(err)
	}
	var base string
	for _, line := range strings.Split(string(self), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			base = filepath.Join(root, p)
		}
	}
	top := filepath.Join(base, fmt.Sprintf("gpushare-test-%d", os.Getpid()))
	dir := filepath.Join(top, "pod"+uid, cid)
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // G703: under the host's cgroup root, named by the test
		t.Skipf("cannot make a cgroup: %v", err)
	}
	t.Cleanup(func() {
		for d := dir; d != filepath.Dir(top); d = filepath.Dir(d) {
			for i := 0; i < 50 && os.Remove(d) != nil; i++ { //nolint:gosec // G703: the test's own cgroup; empty once the process is reaped
				time.Sleep(20 * time.Millisecond)
			}
		}
	})
	return dir
}

// cgroup2Mount finds where the cgroup v2 hierarchy is mounted.
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		for i, fld := range fields {
			if fld == "-" && i+1 < len(fields) && fields[i+1] == "cgroup2" {
				return fields[4], nil
			}
		}
	}
	return "", errors.New("no cgroup v2 hierarchy mounted")
}
