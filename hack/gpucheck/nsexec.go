package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// keptMountFlags are the flags of a bind mount that a read-only remount must repeat: the
// kernel refuses to clear them on a mount that a less privileged namespace locked.
const keptMountFlags = syscall.MS_NOSUID | syscall.MS_NODEV | syscall.MS_NOEXEC | syscall.MS_NOATIME |
	syscall.MS_NODIRATIME | syscall.MS_RELATIME

// runNSExec is the namespace helper. Its parent started it in a new mount namespace; it builds
// the container's root (the host's folders, bound, with the container's mounts on top), enters
// it with chroot and execs the workload with exactly the spec's env. It returns only on failure.
func runNSExec(arg string) error {
	if arg == nsExecProbe {
		return nil
	}
	raw, err := os.ReadFile(arg) //nolint:gosec // G304: the spec its parent wrote
	if err != nil {
		return fmt.Errorf("read container spec: %w", err)
	}
	var spec containerSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("decode container spec: %w", err)
	}
	// The parent's runtime made / private already; again here, so that no mount below can
	// propagate to the host whatever started us.
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	// The stage holds the root being built: unbindable, so that the recursive binds of the
	// host's folders do not copy the root into itself.
	if err := syscall.Mount(spec.Stage, spec.Stage, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("bind the stage: %w", err)
	}
	if err := syscall.Mount("", spec.Stage, "", syscall.MS_UNBINDABLE, ""); err != nil {
		return fmt.Errorf("make the stage unbindable: %w", err)
	}
	b := &rootBuilder{stage: spec.Stage, root: filepath.Join(spec.Stage, "root"), ours: map[string]bool{}}
	if err := b.build(spec.Mounts); err != nil {
		return err
	}
	if err := syscall.Chroot(b.root); err != nil {
		return fmt.Errorf("chroot %s: %w", b.root, err)
	}
	if err := os.Chdir("/"); err != nil {
		return fmt.Errorf("chdir /: %w", err)
	}
	if err := syscall.Exec(spec.Argv[0], spec.Argv, spec.Env); err != nil { //nolint:gosec // G204: the workload its parent chose
		return fmt.Errorf("exec %s: %w", spec.Argv[0], err)
	}
	return nil
}

// rootBuilder makes a container's root in a new mount namespace without writing to any host
// folder: the root is a tmpfs holding a bind of each of the host's top folders; a mount whose
// target does not exist gets its parent replaced by a tmpfs holding binds of the parent's
// entries (as bubblewrap does), where the target can then be created.
type rootBuilder struct {
	stage, root string
	// ours are the folders of root that live on a tmpfs of ours: entries may be created there.
	ours map[string]bool
	// binds counts the stage folders that hold the original of a replaced folder.
	binds int
}

// build mounts the root and then the container's mounts, parents before children.
func (b *rootBuilder) build(mounts []mountSpec) error {
	if err := os.MkdirAll(b.root, 0o755); err != nil { //nolint:gosec // G301: a root file system, readable by the container's users
		return fmt.Errorf("container root: %w", err)
	}
	if err := syscall.Mount("tmpfs", b.root, "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("mount the container root: %w", err)
	}
	b.ours[b.root] = true
	if err := b.populate(b.root, "/"); err != nil {
		return err
	}
	sorted := append([]mountSpec(nil), mounts...)
	sort.SliceStable(sorted, func(i, j int) bool {
		return strings.Count(sorted[i].ContainerPath, "/") < strings.Count(sorted[j].ContainerPath, "/")
	})
	for _, m := range sorted {
		if err := b.mount(m); err != nil {
			return err
		}
	}
	return nil
}

// populate binds every entry of the folder src into the empty folder dst of ours (symbolic
// links are copied).
func (b *rootBuilder) populate(dst, src string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("list %s: %w", src, err)
	}
	for _, e := range entries {
		from, to := filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())
		if err := b.bindEntry(from, to, e.Type()); err != nil {
			return err
		}
	}
	return nil
}

// bindEntry makes to (in a folder of ours) the same entry as from.
func (b *rootBuilder) bindEntry(from, to string, typ fs.FileMode) error {
	switch {
	case typ&fs.ModeSymlink != 0:
		target, err := os.Readlink(from)
		if err != nil {
			return fmt.Errorf("read link %s: %w", from, err)
		}
		if err := os.Symlink(target, to); err != nil {
			return fmt.Errorf("copy link %s: %w", from, err)
		}
		return nil
	case typ.IsDir():
		if err := os.Mkdir(to, 0o755); err != nil { //nolint:gosec // G301: a mount point; the mount decides its mode
			return fmt.Errorf("mount point %s: %w", to, err)
		}
	default:
		if err := touch(to); err != nil {
			return err
		}
	}
	if err := syscall.Mount(from, to, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return nil // gone since it was listed
		}
		return fmt.Errorf("bind %s on %s: %w", from, to, err)
	}
	return nil
}

// mount binds m.HostPath on its container path, read-only where asked.
func (b *rootBuilder) mount(m mountSpec) error {
	if !filepath.IsAbs(m.ContainerPath) || !filepath.IsAbs(m.HostPath) {
		return fmt.Errorf("mount %s on %s: paths must be absolute", m.HostPath, m.ContainerPath)
	}
	st, err := os.Stat(m.HostPath)
	if err != nil {
		return fmt.Errorf("mount source: %w", err)
	}
	target := filepath.Join(b.root, m.ContainerPath)
	if err := b.ensure(target, st.IsDir()); err != nil {
		return err
	}
	if err := syscall.Mount(m.HostPath, target, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s on %s: %w", m.HostPath, m.ContainerPath, err)
	}
	delete(b.ours, target) // the host's folder now: nothing may be created in it
	if !m.ReadOnly {
		return nil
	}
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(target, &sfs); err != nil {
		return fmt.Errorf("statfs %s: %w", m.ContainerPath, err)
	}
	flags := uintptr(syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY) | uintptr(sfs.Flags)&keptMountFlags //nolint:gosec // G115: mount flags are small
	if err := syscall.Mount("", target, "", flags, ""); err != nil {
		return fmt.Errorf("make %s read-only: %w", m.ContainerPath, err)
	}
	return nil
}

// ensure makes path exist in the root (a folder when dir), replacing host folders on the way
// by folders of ours where it must create something.
func (b *rootBuilder) ensure(path string, dir bool) error {
	if _, err := os.Lstat(path); err == nil {
		return nil
	}
	parent := filepath.Dir(path)
	if parent == path || !strings.HasPrefix(parent, b.root) {
		return fmt.Errorf("cannot create %s: outside the container root", path)
	}
	if err := b.ensure(parent, true); err != nil {
		return err
	}
	if !b.ours[parent] {
		if err := b.replace(parent); err != nil {
			return err
		}
	}
	if !dir {
		return touch(path)
	}
	if err := os.Mkdir(path, 0o755); err != nil { //nolint:gosec // G301: a folder of the container's root, as an image's
		return fmt.Errorf("create %s: %w", path, err)
	}
	b.ours[path] = true
	return nil
}

// replace puts a tmpfs of ours over the root's folder dir, holding binds of what dir held.
func (b *rootBuilder) replace(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("replace %s: %w", dir, err)
	}
	b.binds++
	orig := filepath.Join(b.stage, "orig-"+strconv.Itoa(b.binds))
	if err := os.Mkdir(orig, 0o700); err != nil {
		return fmt.Errorf("replace %s: %w", dir, err)
	}
	if err := syscall.Mount(dir, orig, "", syscall.MS_BIND|syscall.MS_REC, ""); err != nil {
		return fmt.Errorf("replace %s: keep the original: %w", dir, err)
	}
	mode := uint32(st.Mode().Perm())
	if st.Mode()&fs.ModeSticky != 0 {
		mode |= syscall.S_ISVTX
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("mode=%o", mode)); err != nil {
		return fmt.Errorf("replace %s: %w", dir, err)
	}
	b.ours[dir] = true
	return b.populate(dir, orig)
}

// touch creates an empty file (a mount point) at path.
func touch(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644) //nolint:gosec // G304: a path in the container root
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}
