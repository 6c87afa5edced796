package enforce

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/gpushare/gpushare/pkg/enforce/fake"
)

// TestPrepareBoundsCounterFolder: each container's counter folder gets a tmpfs of CounterSize
// before Prepare hands it out; 0 leaves a plain folder; a mount that fails fails Prepare, saying
// how to fix the node, rather than handing out an unbounded host folder.
func TestPrepareBoundsCounterFolder(t *testing.T) {
	tests := []struct {
		name        string
		size        int64
		failMount   error
		wantMounted map[string]int64 // counter folder (under StateDir) → size
		wantErr     string
	}{
		{name: "default size", size: DefaultCounterSize, wantMounted: map[string]int64{"pods/uid-p/c": DefaultCounterSize}},
		{name: "larger size", size: 16 << 20, wantMounted: map[string]int64{"pods/uid-p/c": 16 << 20}},
		{name: "0: plain folders", size: 0, wantMounted: map[string]int64{}},
		{name: "mount refused", size: DefaultCounterSize, failMount: fmt.Errorf("%w: mount: %w", ErrCounterMount, unix.EPERM),
			wantMounted: map[string]int64{}, wantErr: "--hami-core-counter-size=0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := limitConfig(t, t.TempDir())
			cfg.CounterSize = tt.size
			m := &fake.Mounter{FailMount: tt.failMount}
			h := newHAMiCore(t, cfg, m)
			_, err := h.Prepare(Request{PodUID: "uid-p", Container: "c", Pod: "default/p", CardBytes: []int64{1 << 30}})
			if tt.wantErr != "" {
				if !errors.Is(err, ErrCounterMount) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "pod default/p container c") {
					t.Fatalf("Prepare = %v; want an error naming the container and saying %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("Prepare: %v", err)
			}
			got := map[string]int64{}
			for dir, size := range m.Mounted {
				rel, _ := filepath.Rel(cfg.StateDir, dir)
				got[rel] = size
			}
			if diff := cmp.Diff(tt.wantMounted, got); diff != "" {
				t.Errorf("counter folders mounted (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestTmpfsMounterReal mounts a real 64 KiB counter tmpfs (root only), writes into it until
// the file system is full, and checks that it stopped at its size, that it holds few files and
// is open to all but nosuid, nodev and noexec; then unmounts it, and again (no error).
func TestTmpfsMounterReal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root (CAP_SYS_ADMIN); the fake mounter covers the backend's logic")
	}
	const size = 64 << 10
	dir := filepath.Join(t.TempDir(), "c")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := tmpfsMounter{}
	if err := m.Mount(dir, size); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skipf("root without CAP_SYS_ADMIN cannot mount: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) }) // before TempDir's removal
	// a second Allocate for the container finds its tmpfs and keeps it
	if err := m.Mount(dir, size); err != nil {
		t.Fatalf("mount on the mounted folder: %v", err)
	}
	checkTmpfs(t, dir, size)
	written, err := fill(filepath.Join(dir, "fill"))
	if !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("writing into the tmpfs stopped with %v after %d bytes, want ENOSPC", err, written)
	}
	if written > size || written < size-4096 {
		t.Errorf("the tmpfs took %d bytes, want about its size %d", written, size)
	}
	files := 0
	for ; files <= counterInodes; files++ {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprint("f", files)), nil, 0o600); err != nil {
			break
		}
	}
	if files >= counterInodes {
		t.Errorf("the tmpfs took %d files, want fewer than %d", files, counterInodes)
	}
	for range 2 {
		if err := m.Unmount(dir); err != nil {
			t.Fatalf("unmount: %v", err)
		}
	}
	if on, err := isMountPoint(dir); err != nil || on {
		t.Errorf("after unmount, isMountPoint = %v, %v", on, err)
	}
	if err := m.Unmount(filepath.Join(dir, "gone")); err != nil {
		t.Errorf("unmount of a missing folder: %v", err)
	}
}

// checkTmpfs checks that dir is a tmpfs of size bytes, mode 1777, nosuid, nodev and noexec.
func checkTmpfs(t *testing.T, dir string, size int64) {
	t.Helper()
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Type != unix.TMPFS_MAGIC || int64(fs.Blocks)*fs.Bsize != size { //nolint:gosec // G115: a 64 KiB file system
		t.Errorf("statfs: type %#x, %d blocks of %d bytes; want a tmpfs of %d bytes", fs.Type, fs.Blocks, fs.Bsize, size)
	}
	for name, flag := range map[string]int64{"nosuid": unix.ST_NOSUID, "nodev": unix.ST_NODEV, "noexec": unix.ST_NOEXEC} {
		if fs.Flags&flag == 0 {
			t.Errorf("the tmpfs is not %s (flags %#x)", name, fs.Flags)
		}
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o777 || st.Mode()&os.ModeSticky == 0 {
		t.Errorf("the tmpfs root: %v, %v; want mode 1777", st.Mode(), err)
	}
}

// fill writes into path until an error, and returns the bytes written.
func fill(path string) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	chunk := make([]byte, 4096)
	var written int64
	for written < 1<<30 {
		n, err := f.Write(chunk)
		written += int64(n)
		if err != nil {
			return written, err
		}
	}
	return written, errors.New("no limit")
}
