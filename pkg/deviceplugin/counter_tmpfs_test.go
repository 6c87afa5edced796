package deviceplugin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// fakeMounter stands in for tmpfsMounter where tests cannot (or should not) mount: it records
// the folders mounted, with their size, and those unmounted, in order.
type fakeMounter struct {
	mu        sync.Mutex
	mounted   map[string]int64
	unmounted []string
	// failMount and failUnmount, when set, are the errors of every mount and unmount.
	failMount, failUnmount error
}

var _ counterMounter = (*fakeMounter)(nil)

func (f *fakeMounter) mount(dir string, size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failMount != nil {
		return f.failMount
	}
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("mount on a folder that is not there: %w", err)
	}
	if f.mounted == nil {
		f.mounted = map[string]int64{}
	}
	f.mounted[dir] = size
	return nil
}

func (f *fakeMounter) unmount(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failUnmount != nil {
		return f.failUnmount
	}
	if _, ok := f.mounted[dir]; ok {
		if _, err := os.Stat(dir); err != nil {
			return fmt.Errorf("unmount after the folder was removed: %w", err)
		}
		delete(f.mounted, dir)
	}
	f.unmounted = append(f.unmounted, dir)
	return nil
}

// TestAllocateBoundsCounterFolder: under HAMi-core each container's counter folder gets a
// tmpfs of --hami-core-counter-size before Allocate hands it out; 0 leaves a plain folder; a
// mount that fails fails that container's Allocate (FailedPrecondition, a Warning Event), saying
// how to fix the node, rather than handing out an unbounded host folder.
func TestAllocateBoundsCounterFolder(t *testing.T) {
	tests := []struct {
		name        string
		size        int64
		failMount   error
		wantMounted map[string]int64 // counter folder (under StateDir) → size
		wantErr     string
	}{
		{name: "default size", size: DefaultCounterSize, wantMounted: map[string]int64{"pods/uid-p/i": DefaultCounterSize, "pods/uid-p/c": DefaultCounterSize}},
		{name: "larger size", size: 16 << 20, wantMounted: map[string]int64{"pods/uid-p/i": 16 << 20, "pods/uid-p/c": 16 << 20}},
		{name: "0: plain folders", size: 0, wantMounted: map[string]int64{}},
		{name: "mount refused", size: DefaultCounterSize, failMount: fmt.Errorf("%w: mount: %w", errCounterMount, unix.EPERM),
			wantMounted: map[string]int64{}, wantErr: "--hami-core-counter-size=0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := limitConfig(t, t.TempDir())
			cfg.CounterSize = tt.size
			m := &fakeMounter{failMount: tt.failMount}
			pod := st.MakePod().Name("p").Node(testNode).NamedInitGPUMem("i", 2).NamedGPUMem("c", 4).
				Allocation(contract.Allocation{"init-0": {1: 2}, "0": {3: 4}}).Obj()
			h := newHarnessWith(t, listBeforeAdmit, mockhost.Options{MemoryBytes: 40 << 30},
				[]Option{WithMemoryLimit(cfg), withCounterMounter(m)}, pod)
			h.kubelet.AddPod(pod)
			resp, err := h.allocate(h.preferred(2))
			if tt.wantErr != "" {
				if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), `container i`) {
					t.Fatalf("Allocate = %v, %v; want FailedPrecondition naming container i and saying %q", resp, err, tt.wantErr)
				}
				if msg := eventMessage(t, h, reasonAllocateFailed); !strings.Contains(msg, tt.wantErr) {
					t.Errorf("event %q does not say %q", msg, tt.wantErr)
				}
			} else {
				if err != nil {
					t.Fatalf("Allocate for the init container: %v", err)
				}
				if _, err := h.allocate(h.preferred(4)); err != nil {
					t.Fatalf("Allocate for the app container: %v", err)
				}
			}
			got := map[string]int64{}
			for dir, size := range m.mounted {
				rel, _ := filepath.Rel(cfg.StateDir, dir)
				got[rel] = size
			}
			if diff := cmp.Diff(tt.wantMounted, got); diff != "" {
				t.Errorf("counter folders mounted (-want,+got):\n%s", diff)
			}
		})
	}
}

// TestCollectUnmountsCounters: a gone pod's counter folders are unmounted before they are
// removed; a folder that cannot be unmounted is kept (and retried on the next pass).
func TestCollectUnmountsCounters(t *testing.T) {
	tests := []struct {
		name          string
		failUnmount   error
		wantUnmounted []string
		wantKept      bool
	}{
		{name: "unmounted, then removed", wantUnmounted: []string{"a", "b"}},
		{name: "unmount fails: kept", failUnmount: unix.EBUSY, wantKept: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := limitConfig(t, t.TempDir())
			cfg.CounterSize = DefaultCounterSize
			_, ctx := ktesting.NewTestContext(t)
			m := &fakeMounter{}
			l := newLimiter(ctx, cfg, m)
			gone := filepath.Join(cfg.StateDir, podsDir, "uid-gone")
			for _, c := range []string{"a", "b"} {
				if err := os.MkdirAll(filepath.Join(gone, c), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := l.boundCounters(filepath.Join(gone, c)); err != nil {
					t.Fatal(err)
				}
			}
			old := time.Now().Add(-2 * DefaultCollectAfter)
			if err := os.Chtimes(gone, old, old); err != nil {
				t.Fatal(err)
			}
			m.failUnmount = tt.failUnmount
			l.collect(ctx, []*v1.Pod{}, time.Now())
			var got []string
			for _, dir := range m.unmounted {
				got = append(got, filepath.Base(dir))
			}
			if diff := cmp.Diff(tt.wantUnmounted, got); diff != "" {
				t.Errorf("unmounted (-want,+got):\n%s", diff)
			}
			if _, err := os.Stat(gone); (err == nil) != tt.wantKept {
				t.Errorf("gone pod's folder: stat error %v, want kept %v", err, tt.wantKept)
			}
		})
	}
}

// TestTmpfsMounterReal mounts a real 64 KiB counter tmpfs (root only), writes into it until
// the file system is full, and checks that it stopped at its size, that it holds few files and
// is open to all but nosuid, nodev and noexec; then unmounts it, and again (no error).
func TestTmpfsMounterReal(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root (CAP_SYS_ADMIN); the fake mounter covers the plugin's logic")
	}
	const size = 64 << 10
	dir := filepath.Join(t.TempDir(), "c")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := tmpfsMounter{}
	if err := m.mount(dir, size); err != nil {
		if errors.Is(err, unix.EPERM) {
			t.Skipf("root without CAP_SYS_ADMIN cannot mount: %v", err)
		}
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) }) // before TempDir's removal
	// a second Allocate for the container finds its tmpfs and keeps it
	if err := m.mount(dir, size); err != nil {
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
		if err := m.unmount(dir); err != nil {
			t.Fatalf("unmount: %v", err)
		}
	}
	if on, err := isMountPoint(dir); err != nil || on {
		t.Errorf("after unmount, isMountPoint = %v, %v", on, err)
	}
	if err := m.unmount(filepath.Join(dir, "gone")); err != nil {
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
