package imagecheck

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// entry is a file in a test layer: a folder (dir), a symlink (link), an overlay whiteout (a
// 0:0 character device, which needs CAP_MKNOD) or a regular file; opaque marks a folder opaque.
type entry struct {
	dir      bool
	link     string
	whiteout bool
	opaque   bool
}

// makeLayers writes layers (top first) under t.TempDir and returns their folders and the set of
// opaque folders.
func makeLayers(t *testing.T, layers []map[string]entry) ([]string, map[string]bool) {
	t.Helper()
	root := t.TempDir()
	opaque := map[string]bool{}
	var dirs []string
	for i, files := range layers {
		dir := filepath.Join(root, "layer"+string(rune('0'+i)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, e := range files {
			full := filepath.Join(dir, name)
			if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			var err error
			switch {
			case e.dir:
				err = os.MkdirAll(full, 0o755)
			case e.link != "":
				err = os.Symlink(e.link, full)
			case e.whiteout:
				if err = unix.Mknod(full, unix.S_IFCHR, 0); err != nil {
					t.Skipf("cannot make a whiteout (a 0:0 character device) here: %v", err)
				}
			default:
				err = os.WriteFile(full, []byte("x"), 0o644)
			}
			if err != nil {
				t.Fatal(err)
			}
			if e.opaque {
				opaque[full] = true
			}
		}
		dirs = append(dirs, dir)
	}
	return dirs, opaque
}

func TestCheckPaths(t *testing.T) {
	preload := []string{"/etc/ld.so.preload", "/usr/local/gpushare/hami-core/libvgpu.so"}
	tests := []struct {
		name   string
		layers []map[string]entry
		paths  []string
		want   string // a substring of the error; "" for none
	}{
		{name: "plain image", paths: preload,
			layers: []map[string]entry{{"etc/passwd": {}, "usr/bin": {dir: true}}}},
		{name: "preload is a symlink", paths: preload, want: "/etc/ld.so.preload is a symlink to \"/tmp/preload\"",
			layers: []map[string]entry{{"etc/ld.so.preload": {link: "/tmp/preload"}}}},
		{name: "etc is a symlink", paths: preload, want: "/etc is a symlink",
			layers: []map[string]entry{{"etc": {link: "data/etc"}}}},
		{name: "a folder on the way to the library is a symlink", paths: preload, want: "/usr/local is a symlink",
			layers: []map[string]entry{{"usr/local": {link: "/data"}, "etc": {dir: true}}}},
		{name: "symlink in a lower layer, replaced by a folder above", paths: preload,
			layers: []map[string]entry{{"etc": {dir: true}}, {"etc": {link: "/data"}}}},
		{name: "symlink in a lower layer under an upper folder", paths: preload, want: "/etc/ld.so.preload is a symlink",
			layers: []map[string]entry{{"etc/hosts": {}}, {"etc/ld.so.preload": {link: "/x"}}}},
		{name: "opaque upper folder hides a lower symlink", paths: preload,
			layers: []map[string]entry{{"etc": {dir: true, opaque: true}}, {"etc/ld.so.preload": {link: "/x"}}}},
		{name: "upper file hides a lower symlink", paths: preload,
			layers: []map[string]entry{{"etc/ld.so.preload": {}}, {"etc/ld.so.preload": {link: "/x"}}}},
		{name: "upper symlink over a lower folder", paths: preload, want: "/usr is a symlink",
			layers: []map[string]entry{{"usr": {link: "/opt"}}, {"usr/local": {dir: true}}}},
		{name: "a file where a folder should be ends the path", paths: preload,
			layers: []map[string]entry{{"usr": {}, "etc": {dir: true}}}},
		{name: "symlink below an upper non-folder is hidden", paths: preload,
			layers: []map[string]entry{{"usr": {}}, {"usr/local": {link: "/x"}}}},
		{name: "whiteout hides a lower symlink", paths: preload,
			layers: []map[string]entry{{"etc/ld.so.preload": {whiteout: true}}, {"etc/ld.so.preload": {link: "/x"}}}},
		{name: "whiteout of a folder hides a symlink under it", paths: preload,
			layers: []map[string]entry{{"usr": {whiteout: true}}, {"usr/local": {link: "/x"}}}},
		{name: "relative path refused", paths: []string{"etc/ld.so.preload"}, want: "not absolute and clean",
			layers: []map[string]entry{{}}},
		{name: "unclean path refused", paths: []string{"/etc/../etc/ld.so.preload"}, want: "not absolute and clean",
			layers: []map[string]entry{{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dirs, opaque := makeLayers(t, tt.layers)
			v := layerView{layers: dirs, opaque: func(d string) bool { return opaque[d] }}
			err := v.checkPaths(tt.paths)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("checkPaths: %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("checkPaths: %v, want an error with %q", err, tt.want)
			}
			if strings.Contains(tt.want, "symlink") && !errors.Is(err, ErrRedirected) {
				t.Errorf("error %v is not ErrRedirected", err)
			}
		})
	}
}
