package enforce

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// DefaultCounterSize bounds each container's HAMi-core counter folder (Config.CounterSize):
// a tmpfs of 4 MiB. HAMi-core's counter file is its mmap'ed shared_region_t
// (src/multiprocess/multiprocess_memory_limit.h): 2,008,952 bytes at the pinned commit
// 8f3a89c (1,024 process slots of 1,960 bytes, 16 cards), plus the one byte it writes at the
// end, so 491 pages of 4 KiB. 2 MiB (512 pages) would hold one such file; 4 MiB holds two, for
// a container restarted after a library upgrade, which starts a new file named after the new
// library (hamiCore.cacheFile) next to the old one. Pages are charged to the memory cgroup of
// the container that touches them.
const DefaultCounterSize = 4 << 20

// MinCounterSize is the smallest bound Config.Validate accepts besides 0: one counter file
// of the pinned HAMi-core (see DefaultCounterSize). A smaller folder would make HAMi-core's
// mmap'ed region fault (SIGBUS) in every CUDA process of the container.
const MinCounterSize = 2 << 20

// counterInodes bounds the files of one counter folder: HAMi-core makes one per library
// version; a few more leave room for the container's own stray files without letting it
// spend the node's memory on inodes.
const counterInodes = 64

// counterFSName is the source of the counter tmpfs mounts, as /proc/mounts shows it.
const counterFSName = "gpushare-counters"

// ErrCounterMount is wrapped when a container's counter folder cannot be bounded.
var ErrCounterMount = errors.New("cannot bound the HAMi-core counter folder")

// Mounter puts a size-bounded file system on each container's counter folder, so that
// a container cannot fill the node's disk through the folder it shares with the host. The
// backend uses tmpfsMounter unless WithMounter replaces it (tests that cannot mount).
type Mounter interface {
	// Mount mounts a tmpfs of size bytes, open to all (mode 1777), nosuid, nodev, noexec, on
	// the folder dir, unless one is mounted there already (a restarted plugin, a repeated
	// Allocate).
	Mount(dir string, size int64) error
	// Unmount detaches the file system mounted on dir; a dir that is not a mount point, or is
	// gone, is no error.
	Unmount(dir string) error
}

// tmpfsMounter mounts real tmpfs file systems (it needs CAP_SYS_ADMIN).
type tmpfsMounter struct{}

var _ Mounter = tmpfsMounter{}

func (tmpfsMounter) Mount(dir string, size int64) error {
	on, err := isMountPoint(dir)
	if err != nil {
		return err
	}
	if on {
		var fs unix.Statfs_t
		if err := unix.Statfs(dir, &fs); err != nil {
			return fmt.Errorf("%w: statfs %s: %w", ErrCounterMount, dir, err)
		}
		if fs.Type != unix.TMPFS_MAGIC {
			return fmt.Errorf("%w: %s is a mount point of another file system (type %#x)", ErrCounterMount, dir, fs.Type)
		}
		return nil // ours, from an earlier Allocate or plugin run: its counters stay
	}
	opts := fmt.Sprintf("size=%d,nr_inodes=%d,mode=1777", size, counterInodes)
	if err := unix.Mount(counterFSName, dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return fmt.Errorf("%w: mount a %d-byte tmpfs on %s: %w", ErrCounterMount, size, dir, err)
	}
	return nil
}

func (tmpfsMounter) Unmount(dir string) error {
	on, err := isMountPoint(dir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && !on) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// isMountPoint reports whether a file system is mounted on dir: dir and its parent are on
// different devices (true of every tmpfs, which gets a device of its own). A missing dir is an
// error wrapping os.ErrNotExist.
func isMountPoint(dir string) (bool, error) {
	var st, parent unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return false, fmt.Errorf("stat %s: %w", dir, err)
	}
	if err := unix.Lstat(filepath.Dir(dir), &parent); err != nil {
		return false, fmt.Errorf("stat %s: %w", filepath.Dir(dir), err)
	}
	return st.Dev != parent.Dev, nil
}

// boundCounters mounts the size-bounded file system on a container's counter folder dir,
// when the configuration asks for one (CounterSize > 0). A failure is the node's
// misconfiguration, said so: the container must not get an unbounded host folder instead.
func (h *hamiCore) boundCounters(dir string) error {
	if h.cfg.CounterSize == 0 {
		return nil // documented as unbounded
	}
	if err := h.mounter.Mount(dir, h.cfg.CounterSize); err != nil {
		return fmt.Errorf("%w (--hami-core-counter-size=%d); the node is misconfigured: give share-plugin the privilege to mount "+
			"(privileged, its state folder mounted with mountPropagation: Bidirectional), or set --hami-core-counter-size=0 "+
			"to hand out unbounded host folders", err, h.cfg.CounterSize)
	}
	return nil
}

// removeCounters unmounts the counter folders of a gone pod (podDir, holding one folder per
// container) and removes them. It stops at the first folder it cannot unmount: removing it
// would empty a tmpfs that some container may still see, and fail on the mount point anyway.
func (h *hamiCore) removeCounters(podDir string) error {
	entries, err := os.ReadDir(podDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("list %s: %w", podDir, err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if err := h.mounter.Unmount(filepath.Join(podDir, e.Name())); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(podDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", podDir, err)
	}
	return nil
}
