package imagecheck

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrRedirected is returned for an image in which a protected path goes through a symlink.
var ErrRedirected = errors.New("image redirects a protected path")

// opaqueXattrs mark an overlay folder that hides the layers below it (containerd's overlayfs
// snapshotter applies layers with the trusted. names; the user. ones are userxattr mounts').
var opaqueXattrs = []string{"trusted.overlay.opaque", "user.overlay.opaque"}

// isOpaque reports whether dir is an overlay opaque folder.
func isOpaque(dir string) bool {
	buf := make([]byte, 8)
	for _, name := range opaqueXattrs {
		if n, err := unix.Lgetxattr(dir, name, buf); err == nil && n > 0 && buf[0] == 'y' {
			return true
		}
	}
	return false
}

// layerView is an image's root filesystem as overlay stacks it: its layer folders, the top
// one first.
type layerView struct {
	layers []string
	opaque func(dir string) bool
}

// checkPaths returns ErrRedirected, naming the component, when any of paths (absolute, clean)
// goes through a symlink in the view. A path that ends early (a component is missing, or is a
// file where a folder should be) has no symlink on it: the runtime creates what is missing.
func (v layerView) checkPaths(paths []string) error {
	for _, p := range paths {
		if err := v.checkPath(p); err != nil {
			return err
		}
	}
	return nil
}

func (v layerView) checkPath(p string) error {
	if !path.IsAbs(p) || path.Clean(p) != p {
		return fmt.Errorf("protected path %q is not absolute and clean", p)
	}
	dirs := v.layers // the layers that hold the current folder, top first
	cur := "/"
	for _, name := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		if name == "" {
			continue
		}
		cur = path.Join(cur, name)
		next, err := v.lookup(dirs, cur)
		if err != nil {
			return err
		}
		if len(next) == 0 {
			return nil
		}
		dirs = next
	}
	return nil
}

// lookup finds p in the layers that hold its parent folder, as overlay would: the topmost entry
// wins; a whiteout hides it; a folder merges with the folders below it, down to an opaque one
// or a non-folder. It returns the layers that hold p as a folder (none when p is absent or not a
// folder), or ErrRedirected when the entry that wins is a symlink.
func (v layerView) lookup(dirs []string, p string) ([]string, error) {
	var found []string
	for _, layer := range dirs {
		full := filepath.Join(layer, filepath.FromSlash(p))
		fi, err := os.Lstat(full)
		switch {
		case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
			continue
		case err != nil:
			return nil, fmt.Errorf("read layer %s: %w", layer, err)
		}
		if len(found) > 0 && !fi.IsDir() {
			return found, nil // a folder above hides what is not a folder below
		}
		switch {
		case isWhiteout(fi):
			return found, nil
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(full)
			return nil, fmt.Errorf("%w: %s is a symlink to %q", ErrRedirected, p, target)
		case !fi.IsDir():
			return nil, nil
		}
		found = append(found, layer)
		if v.opaque != nil && v.opaque(full) {
			return found, nil
		}
	}
	return found, nil
}

// isWhiteout reports an overlay whiteout: a character device 0:0.
func isWhiteout(fi fs.FileInfo) bool {
	if fi.Mode()&fs.ModeCharDevice == 0 {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Rdev == 0
}
