package usage

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// EscapePreload is the kind of escape of a process that does not see the share-plugin's
// preload list or library where HAMi-core is loaded from: the image left a symlink at
// /etc/ld.so.preload (runc follows it, so the plugin's read-only file lands elsewhere and the
// container can remove the link), a mount covers the file, or the process made a mount
// namespace of its own. Every program such a process starts runs without HAMi-core, GPU or
// not, so the check covers every process of a container held to a limit, not only those NVML
// lists.
const EscapePreload = "preload_changed"

// ContainerPreloadPath is where the dynamic loader reads its preload list, in every container.
const ContainerPreloadPath = "/etc/ld.so.preload"

// ViewProbe tells, from the host, whether a process sees the share-plugin's files.
type ViewProbe interface {
	// PIDs lists the host's processes.
	PIDs() ([]uint32, error)
	// Changed says why host process pid does not see the plugin's preload list or library at
	// their paths ("" when it does); ErrProcessGone when it has exited.
	Changed(pid uint32) (string, error)
}

// ProcView checks processes' views through the host's proc filesystem at Root
// (/proc/<pid>/root): every component of the preload list's and the library's paths must be no
// symlink, and each file the one the plugin mounted (its device and inode on the host).
type ProcView struct {
	Root string
	// Files are the plugin's files by their path in containers.
	Files map[string]HostFile
}

// HostFile is one of the plugin's files as stat(2) names it on the host.
type HostFile struct {
	Dev, Ino uint64
}

// NewProcView identifies the plugin's preload list (hostPreload) and library (library, at the
// same path in containers) on the host.
func NewProcView(root, hostPreload, library string) (*ProcView, error) {
	v := &ProcView{Root: root, Files: map[string]HostFile{}}
	for path, host := range map[string]string{ContainerPreloadPath: hostPreload, library: library} {
		var st unix.Stat_t
		if err := unix.Stat(host, &st); err != nil {
			return nil, fmt.Errorf("share-plugin file %s: %w", host, err)
		}
		v.Files[path] = HostFile{Dev: st.Dev, Ino: st.Ino}
	}
	return v, nil
}

// PIDs lists the numeric entries of Root.
func (v *ProcView) PIDs() ([]uint32, error) {
	entries, err := os.ReadDir(v.Root)
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	out := make([]uint32, 0, len(entries))
	for _, e := range entries {
		if pid, err := strconv.ParseUint(e.Name(), 10, 32); err == nil {
			out = append(out, uint32(pid))
		}
	}
	return out, nil
}

// Changed walks each of the plugin's paths from the process's root directory.
func (v *ProcView) Changed(pid uint32) (string, error) {
	root := filepath.Join(v.Root, strconv.FormatUint(uint64(pid), 10), "root")
	for path, want := range v.Files {
		why, err := v.changed(pid, root, path, want)
		if why != "" || err != nil {
			return why, err
		}
	}
	return "", nil
}

// changed checks one path: no component a symlink (the kernel would resolve an absolute one
// against the plugin's root, not the container's, so none is followed), the last one the
// plugin's file, or an older copy of it that the plugin has since replaced (unlinked on the
// same filesystem: a container started before an upgrade).
func (v *ProcView) changed(pid uint32, root, path string, want HostFile) (string, error) {
	cur := root
	var st unix.Stat_t
	for _, c := range strings.Split(strings.Trim(path, "/"), "/") {
		cur = filepath.Join(cur, c)
		if err := unix.Lstat(cur, &st); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				if _, gone := os.Stat(filepath.Join(v.Root, strconv.FormatUint(uint64(pid), 10))); gone != nil {
					return "", fmt.Errorf("pid %d: %w", pid, ErrProcessGone)
				}
				return strings.TrimPrefix(cur, root) + " is missing", nil
			}
			return "", fmt.Errorf("pid %d: %s: %w", pid, path, err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			return strings.TrimPrefix(cur, root) + " is a symlink", nil
		}
	}
	switch {
	case st.Dev == want.Dev && st.Ino == want.Ino:
		return "", nil
	case st.Dev == want.Dev && st.Nlink == 0:
		return "", nil
	}
	return path + " is not the share-plugin's file (a mount or another file covers it)", nil
}

// findViewEscapes checks every process of the containers held to a limit (limits), GPU or not,
// for the plugin's files (EscapePolicy.View): one escape per container whose processes do not
// see them, with those processes as offenders. A process whose view cannot be read is counted
// and logged, never taken for an escape.
func (s *Sampler) findViewEscapes(ctx context.Context, idx podIndex, limits []ContainerLimit) []escape {
	view := s.cfg.Escapes.View
	if view == nil || len(limits) == 0 {
		return nil
	}
	policed := map[containerKey]uint64{}
	for _, l := range limits {
		policed[containerKey{pod: l.PodUID, container: l.Container}] += l.Bytes
	}
	pids, err := view.PIDs()
	if err != nil {
		s.checkFailed(ctx, 0, err)
		return nil
	}
	byKey := map[containerKey]*escape{}
	var out []*escape
	for _, pid := range pids {
		key, owner, ok := s.policedOwner(idx, pid, policed)
		if !ok {
			continue
		}
		why, err := view.Changed(pid)
		if err != nil {
			s.checkFailed(ctx, pid, err)
			continue
		}
		if why == "" {
			continue
		}
		e, seen := byKey[key]
		if !seen {
			e = &escape{key: escapeKey{containerKey: key, kind: EscapePreload}, pod: idx.byUID[key.pod], why: why, limit: policed[key]}
			byKey[key] = e
			out = append(out, e)
		}
		e.offenders = append(e.offenders, gpuProcess{pid: pid, key: key, owner: owner})
	}
	escapes := make([]escape, len(out))
	for i, e := range out {
		escapes[i] = *e
	}
	return escapes
}

// policedOwner returns the container process pid runs in when it is one of policed.
func (s *Sampler) policedOwner(idx podIndex, pid uint32, policed map[containerKey]uint64) (containerKey, Owner, bool) {
	owner, err := s.cfg.Owners.OwnerOf(pid)
	if err != nil {
		return containerKey{}, Owner{}, false
	}
	ref, ok := idx.byContainer[owner.ContainerID]
	if !ok {
		return containerKey{}, Owner{}, false
	}
	key := containerKey{pod: ref.pod.UID, container: ref.name}
	_, ok = policed[key]
	return key, owner, ok
}
