package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// options says what image to build.
type options struct {
	binary, ref, out, path string
	version, commit        string
	uid                    int
	sharedLibs             bool
	libs                   []string // host paths of the shared libraries to copy
	platform               string
}

// epoch is every file's and the image's creation time: the same binary gives the same image.
var epoch = time.Unix(0, 0).UTC()

// build assembles the image: one layer with the binary at o.path (mode 0755), o.libs at their
// own paths, /etc/passwd and /etc/group naming the non-root user, and /tmp; the config runs the
// binary as that user.
func build(o options) (v1.Image, error) {
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	files := map[string]file{
		o.path:        {data: bin, mode: 0o755},
		"/etc/passwd": {data: fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", o.uid, o.uid), mode: 0o644},
		"/etc/group":  {data: fmt.Appendf(nil, "root:x:0:\nnonroot:x:%d:\n", o.uid), mode: 0o644},
	}
	for _, lib := range o.libs {
		data, err := os.ReadFile(lib)
		if err != nil {
			return nil, fmt.Errorf("read shared library: %w", err)
		}
		files[lib] = file{data: data, mode: 0o755}
	}
	layerTar, err := tarOf(files, []string{"/tmp", "/home/nonroot"}, o.uid)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layerTar)), nil })
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, fmt.Errorf("append layer: %w", err)
	}
	osName, arch, ok := strings.Cut(o.platform, "/")
	if !ok {
		return nil, fmt.Errorf("--platform %q: want os/arch", o.platform)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = osName, arch, v1.Time{Time: epoch}
	cf.Config.Entrypoint = []string{o.path}
	cf.Config.User = fmt.Sprintf("%d:%d", o.uid, o.uid)
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":    baseName(o.path),
		"org.opencontainers.image.version":  o.version,
		"org.opencontainers.image.revision": o.commit,
		"org.opencontainers.image.source":   "https://github.com/gpushare/gpushare",
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return img, nil
}

// file is one regular file of the layer.
type file struct {
	data []byte
	mode int64
}

// tarOf writes files and the empty folders dirs (mode 1777 for /tmp, else 0755, owned by
// root except /home/nonroot, which uid owns) as a tar, with every parent folder, in name order.
func tarOf(files map[string]file, dirs []string, uid int) ([]byte, error) {
	folders := map[string]bool{}
	addParents := func(p string) {
		for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
			folders[d] = true
		}
	}
	for p := range files {
		addParents(p)
	}
	for _, d := range dirs {
		folders[d] = true
		addParents(d)
	}
	var names []string
	for d := range folders {
		names = append(names, d+"/")
	}
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		h := &tar.Header{Name: strings.TrimPrefix(n, "/"), ModTime: epoch, Format: tar.FormatPAX}
		if strings.HasSuffix(n, "/") {
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
			switch strings.TrimSuffix(n, "/") {
			case "/tmp":
				h.Mode = 0o1777
			case "/home/nonroot":
				h.Uid, h.Gid, h.Mode = uid, uid, 0o700
			}
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
			continue
		}
		f := files[n]
		h.Typeflag, h.Mode, h.Size = tar.TypeReg, f.mode, int64(len(f.data))
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// ldLine matches ldd's "libc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x...)" and
// "/lib64/ld-linux-x86-64.so.2 (0x...)" lines.
var ldLine = regexp.MustCompile(`(?:=>\s*)?(/\S+)\s+\(0x`)

// sharedLibraries lists the absolute paths of the shared libraries ldd reports for binary,
// resolving symbolic links to the files the loader opens under the same names. A static
// binary has none.
func sharedLibraries(binary string) ([]string, error) {
	out, err := exec.Command("ldd", binary).CombinedOutput()
	if err != nil {
		if strings.Contains(string(out), "not a dynamic executable") {
			return nil, nil
		}
		return nil, fmt.Errorf("ldd %s: %w: %s", binary, err, out)
	}
	var libs []string
	for _, line := range strings.Split(string(out), "\n") {
		if m := ldLine.FindStringSubmatch(line); m != nil {
			libs = append(libs, m[1])
		}
	}
	return withSiblings(libs, glibcSiblings), nil
}

// glibcSiblings are the glibc libraries a library loaded later with dlopen links against
// (libnvidia-ml.so.1 needs these); the NVIDIA container runtime mounts the driver's libraries
// into a container, not glibc's.
var glibcSiblings = []string{"libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1"}

// withSiblings adds to libs the names found in the folder of its libc, sorted, once each.
func withSiblings(libs, names []string) []string {
	seen := map[string]bool{}
	for _, l := range libs {
		seen[l] = true
	}
	for _, l := range libs {
		if !strings.HasPrefix(path.Base(l), "libc.so") {
			continue
		}
		for _, n := range names {
			p := path.Join(path.Dir(l), n)
			if _, err := os.Stat(p); err == nil && !seen[p] {
				seen[p] = true
				libs = append(libs, p)
			}
		}
	}
	sort.Strings(libs)
	return libs
}

// write saves img as a tarball tagged ref.
func write(img v1.Image, ref, out string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("--ref: %w", err)
	}
	if err := tarball.WriteToFile(out, tag, img); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
