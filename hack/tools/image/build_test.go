package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestImageRoundTrip builds an image, writes it, reads the tarball back as `docker load` would,
// and checks what a runtime sees: the tag, the entrypoint, a non-root user, the labels, and
// the files with their modes and owners.
func TestImageRoundTrip(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "extender")
	if err := os.WriteFile(bin, []byte("#!/bin/true\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "extender.tar")
	o := options{binary: bin, ref: "gpushare/extender:v9.9.9", out: out, version: "v9.9.9", commit: "abc123", uid: 65532, platform: "linux/arm64"}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(o.ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"/usr/local/bin/extender"}, cf.Config.Entrypoint); diff != "" {
		t.Errorf("entrypoint (-want +got):\n%s", diff)
	}
	if cf.Config.User != "65532:65532" || cf.OS != "linux" || cf.Architecture != "arm64" {
		t.Errorf("user %q os %q arch %q", cf.Config.User, cf.OS, cf.Architecture)
	}
	if got := cf.Config.Labels["org.opencontainers.image.version"] + " " + cf.Config.Labels["org.opencontainers.image.revision"]; got != "v9.9.9 abc123" {
		t.Errorf("labels: %v", cf.Config.Labels)
	}
	type entry struct {
		Mode     int64
		UID      int
		Contents string
	}
	got := map[string]entry{}
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		e := entry{Mode: h.Mode, UID: h.Uid}
		if h.Typeflag == tar.TypeReg && h.Name != "etc/group" {
			raw, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			e.Contents = string(raw)
		}
		got[h.Name] = e
	}
	want := map[string]entry{
		"etc":                    {Mode: 0o755},
		"etc/group":              {Mode: 0o644},
		"etc/passwd":             {Mode: 0o644, Contents: "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
		"home":                   {Mode: 0o755},
		"home/nonroot":           {Mode: 0o700, UID: 65532},
		"tmp":                    {Mode: 0o1777},
		"usr":                    {Mode: 0o755},
		"usr/local":              {Mode: 0o755},
		"usr/local/bin":          {Mode: 0o755},
		"usr/local/bin/extender": {Mode: 0o755, Contents: "#!/bin/true\n"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("image files (-want +got):\n%s", diff)
	}
}

// TestSameBinarySameImage: a build is reproducible (fixed times, sorted entries).
func TestSameBinarySameImage(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "share-plugin")
	if err := os.WriteFile(bin, []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	o := options{binary: bin, path: "/share-plugin", version: "v1", uid: 65532, platform: "linux/amd64"}
	a, err := build(o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := build(o)
	if err != nil {
		t.Fatal(err)
	}
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("two builds of one binary: %s and %s", da, db)
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		o    options
		want string
	}{
		{"no binary", options{ref: "a:b", out: filepath.Join(dir, "x.tar")}, "required"},
		{"missing binary", options{binary: filepath.Join(dir, "nope"), ref: "a:b", out: filepath.Join(dir, "x.tar"), platform: "linux/amd64"}, "read binary"},
		{"bad platform", options{binary: "/bin/sh", ref: "a:b", out: filepath.Join(dir, "x.tar"), platform: "amd64"}, "os/arch"},
		{"bad ref", options{binary: "/bin/sh", ref: "UPPER CASE", out: filepath.Join(dir, "x.tar"), platform: "linux/amd64"}, "--ref"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// TestSharedLibraries: a dynamic binary needs its loader and libc in the image; ldd's lines
// are parsed into absolute paths.
func TestSharedLibraries(t *testing.T) {
	if _, err := exec.LookPath("ldd"); err != nil {
		t.Skip("no ldd on this machine")
	}
	libs, err := sharedLibraries("/bin/sh")
	if err != nil {
		t.Fatal(err)
	}
	var loader, libc, libm bool
	for _, l := range libs {
		if !filepath.IsAbs(l) {
			t.Errorf("%q is not an absolute path", l)
		}
		loader = loader || strings.Contains(filepath.Base(l), "ld-linux")
		libc = libc || strings.HasPrefix(filepath.Base(l), "libc.so")
		libm = libm || filepath.Base(l) == "libm.so.6" // for what dlopen loads later
	}
	if !loader || !libc || !libm {
		t.Errorf("shared libraries of /bin/sh: %v, want the loader, libc and libm", libs)
	}
}
