package usage

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// InterposerProbe tells whether a host process runs with HAMi-core. Loaded says whether host
// process pid maps the HAMi-core library; ErrProcessGone when it has exited.
type InterposerProbe interface {
	Loaded(pid uint32) (bool, error)
}

// FileID is a file as the kernel names it in /proc/<pid>/maps: its device and inode.
type FileID struct {
	Major, Minor uint32
	Inode        uint64
}

// Library is the HAMi-core library that every process of an enforced container maps.
type Library struct {
	// Path is where containers get it (the same path as on the host).
	Path string
	// IDs are the file's device and inode as the kernel shows them in maps (IdentifyLibrary);
	// none when the file could not be read, and Path alone decides.
	IDs []FileID
}

// IdentifyLibrary reads the identity of the library at path: its stat(2) device and inode, and
// those the kernel shows when the file is mapped (the plugin maps one page of it and reads its
// own maps), which differ from stat's on overlayfs and btrfs subvolumes. The Library it returns
// holds Path even with an error, and then matches by path only.
func IdentifyLibrary(path string) (Library, error) {
	lib := Library{Path: path}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return lib, fmt.Errorf("HAMi-core library %s: %w", path, err)
	}
	lib.IDs = append(lib.IDs, FileID{Major: unix.Major(st.Dev), Minor: unix.Minor(st.Dev), Inode: st.Ino})
	mapped, err := mappedID(path)
	if err != nil {
		return lib, err
	}
	if !slices.Contains(lib.IDs, mapped) {
		lib.IDs = append(lib.IDs, mapped)
	}
	return lib, nil
}

// mappedID maps the first page of path and reads its device and inode from /proc/self/maps.
func mappedID(path string) (FileID, error) {
	f, err := os.Open(path) //nolint:gosec // G304: the operator's flag
	if err != nil {
		return FileID{}, fmt.Errorf("HAMi-core library %s: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	page, err := unix.Mmap(int(f.Fd()), 0, os.Getpagesize(), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		return FileID{}, fmt.Errorf("HAMi-core library %s: map: %w", path, err)
	}
	defer func() { _ = unix.Munmap(page) }()
	maps, err := os.Open("/proc/self/maps")
	if err != nil {
		return FileID{}, fmt.Errorf("HAMi-core library %s: %w", path, err)
	}
	defer func() { _ = maps.Close() }()
	resolved, err := filepath.EvalSymlinks(path)
	if err != nil {
		resolved = path
	}
	var found FileID
	ok, err := scanMaps(maps, func(p string, id FileID) bool {
		found = id
		return p == path || p == resolved
	})
	if err != nil || !ok {
		return FileID{}, fmt.Errorf("HAMi-core library %s: not found in the plugin's own maps: %w", path, err)
	}
	return found, nil
}

// Matches says whether a mapping of the file at path (as maps shows it) with identity id is the
// library: the same file (device and inode); by path when its identity is unknown; or the
// library's path marked deleted on the library's device, a process started before the library
// was replaced on the host (an upgrade renames the new file over the old one). A file mounted
// over the library's path in another mount namespace is on another device and does not match.
func (l *Library) Matches(path string, id FileID) bool {
	if slices.Contains(l.IDs, id) {
		return true
	}
	deleted := path == l.Path+" (deleted)"
	if len(l.IDs) == 0 {
		return path == l.Path || deleted
	}
	return deleted && slices.ContainsFunc(l.IDs, func(f FileID) bool { return f.Major == id.Major && f.Minor == id.Minor })
}

// MapsProbe reads whether processes map the library from /proc/<pid>/maps under Root (the
// host's /proc). Reading another user's or a more privileged process's maps takes
// CAP_SYS_PTRACE.
type MapsProbe struct {
	Root    string
	Library Library
}

var _ InterposerProbe = MapsProbe{}

// Loaded says whether pid maps the library.
func (p MapsProbe) Loaded(pid uint32) (bool, error) {
	f, err := os.Open(filepath.Join(p.Root, strconv.FormatUint(uint64(pid), 10), "maps"))
	if errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("pid %d: %w", pid, ErrProcessGone)
	}
	if err != nil {
		return false, fmt.Errorf("pid %d: %w", pid, err)
	}
	defer func() { _ = f.Close() }()
	ok, err := scanMaps(f, p.Library.Matches)
	if err != nil {
		return false, fmt.Errorf("pid %d: maps: %w", pid, procError(err))
	}
	return ok, nil
}

// scanMaps calls match with the path and identity of every file mapping in a maps file until it
// returns true; it says whether one did.
func scanMaps(r io.Reader, match func(path string, id FileID) bool) (bool, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		path, id, ok := parseMapsLine(sc.Text())
		if ok && match(path, id) {
			return true, nil
		}
	}
	return false, sc.Err()
}

// parseMapsLine reads "address perms offset major:minor inode path" (hex device numbers, the
// path padded with spaces, absent for anonymous memory); ok only for a mapped file.
func parseMapsLine(line string) (path string, id FileID, ok bool) {
	rest := line
	var fields [5]string
	for i := range fields {
		rest = strings.TrimLeft(rest, " ")
		end := strings.IndexByte(rest, ' ')
		if end < 0 {
			return "", FileID{}, false
		}
		fields[i], rest = rest[:end], rest[end:]
	}
	path = strings.TrimLeft(rest, " ")
	major, minor, found := strings.Cut(fields[3], ":")
	ma, err1 := strconv.ParseUint(major, 16, 32)
	mi, err2 := strconv.ParseUint(minor, 16, 32)
	ino, err3 := strconv.ParseUint(fields[4], 10, 64)
	if !found || err1 != nil || err2 != nil || err3 != nil || ino == 0 || !strings.HasPrefix(path, "/") {
		return "", FileID{}, false
	}
	return path, FileID{Major: uint32(ma), Minor: uint32(mi), Inode: ino}, true
}
