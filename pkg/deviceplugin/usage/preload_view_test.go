package usage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProcView walks a proc root whose processes see the plugin's files (hard links: the same
// device and inode), or a symlink, another file, nothing, or an /etc that is a symlink.
func TestProcView(t *testing.T) {
	dir := t.TempDir()
	hostPreload, hostLib := filepath.Join(dir, "host", "ld.so.preload"), filepath.Join(dir, "host", "lib", "libvgpu.so")
	for _, f := range []string{hostPreload, hostLib} {
		mustWrite(t, f, "x")
	}
	const lib = "/usr/local/gpushare/libvgpu.so"
	proc := filepath.Join(dir, "proc")
	seen := func(pid, path, host string) {
		p := filepath.Join(proc, pid, "root", path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Link(host, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, pid := range []string{"10", "11", "12", "13", "14"} {
		seen(pid, lib, hostLib)
	}
	seen("10", "etc/ld.so.preload", hostPreload)
	mustSymlink(t, "/tmp/preload", filepath.Join(proc, "11", "root", "etc", "ld.so.preload"))
	mustWrite(t, filepath.Join(proc, "12", "root", "etc", "ld.so.preload"), "x")
	if err := os.MkdirAll(filepath.Join(proc, "13", "root"), 0o755); err != nil {
		t.Fatal(err)
	}
	mustSymlink(t, "/data/etc", filepath.Join(proc, "14", "root", "etc"))

	v, err := NewProcView(proc, hostPreload, hostLib)
	if err != nil {
		t.Fatal(err)
	}
	v.Files[lib] = v.Files[hostLib] // the library at its container path
	delete(v.Files, hostLib)
	for pid, want := range map[uint32]string{
		10: "",
		11: "/etc/ld.so.preload is a symlink",
		12: "/etc/ld.so.preload is not the share-plugin's file (a mount or another file covers it)",
		13: "/etc is missing",
		14: "/etc is a symlink",
	} {
		got, err := v.Changed(pid)
		if err != nil || got != want {
			t.Errorf("pid %d: %q, %v; want %q", pid, got, err, want)
		}
	}
	if _, err := v.Changed(99); !errors.Is(err, ErrProcessGone) {
		t.Errorf("a process that is gone: %v, want ErrProcessGone", err)
	}
	pids, err := v.PIDs()
	if err != nil || len(pids) != 5 {
		t.Errorf("PIDs: %v, %v; want the 5 processes", pids, err)
	}
	if _, err := NewProcView(proc, filepath.Join(dir, "missing"), hostLib); err == nil {
		t.Error("NewProcView accepted a preload file that does not exist")
	}
}

// fakeView is a ViewProbe: pids are the host's processes, changed says why each does not see
// the plugin's files ("" when it does).
type fakeView struct {
	pids    []uint32
	changed map[uint32]string
	errs    map[uint32]error
}

func (v fakeView) PIDs() ([]uint32, error) { return v.pids, nil }
func (v fakeView) Changed(pid uint32) (string, error) {
	return v.changed[pid], v.errs[pid]
}

// TestViewEscapes: every process of a container held to a limit is checked, GPU or not; those
// that do not see the plugin's files are killed and reported once; processes of other
// containers and of the host, and views that cannot be read, are left alone.
func TestViewEscapes(t *testing.T) {
	f := newFixture(t)
	k := &killLog{fail: map[uint32]error{}}
	f.policed(EscapeActionKill, k, probe{})
	f.s.cfg.Escapes.View = fakeView{pids: []uint32{1, 10, 11, 12, 20, 21},
		changed: map[uint32]string{10: "/etc/ld.so.preload is a symlink", 11: "/etc/ld.so.preload is a symlink", 21: "/etc is missing"},
		errs:    map[uint32]error{12: errors.New("permission denied")}}
	f.pods.set(limitedPod("a", "cid-a", 4, 0), gpuPod("b", "cid-b", 0))
	for _, pid := range []uint32{10, 11, 12} {
		f.owners[pid] = Owner{PodUID: "uid-a", ContainerID: "cid-a"}
	}
	for _, pid := range []uint32{20, 21} { // b has no limit: not policed
		f.owners[pid] = Owner{PodUID: "uid-b", ContainerID: "cid-b"}
	}
	for range 2 { // the second reading kills and reports nothing more
		if _, err := f.s.Sample(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff([]string{"10 uid-a/cid-a", "11 uid-a/cid-a"}, k.list()); diff != "" {
		t.Errorf("kills (-want,+got):\n%s", diff)
	}
	want := []string{"a GPUMemoryLimitEscaped: container main does not see the share-plugin's /etc/ld.so.preload and HAMi-core library: " +
		"/etc/ld.so.preload is a symlink (process 10, 11), so the programs it starts run without its GPU memory limit of 4096 MiB; " +
		"action: killed process 10, 11 (SIGKILL); the container restarts as its restartPolicy says"}
	if diff := cmp.Diff(want, f.events.list()); diff != "" {
		t.Errorf("events (-want,+got):\n%s", diff)
	}
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}
