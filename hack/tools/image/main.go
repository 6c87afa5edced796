// Command image assembles a container image from one Go binary without a container engine:
// the binary (and, for a binary linked against glibc, the shared libraries ldd names) as one
// layer on an empty base, run as a non-root user, stamped with version and commit labels, and
// written as a tarball that `docker load`, `podman load` and `ctr images import` read.
//
// It is what `make images` runs; the Dockerfiles under build/ make the same images in users'
// own pipelines.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	var o options
	flag.StringVar(&o.binary, "binary", "", "the program to put in the image")
	flag.StringVar(&o.ref, "ref", "", "image reference the tarball is tagged with, e.g. gpushare/extender:v1.2.0")
	flag.StringVar(&o.out, "out", "", "tarball to write")
	flag.StringVar(&o.path, "path", "", "where the binary goes in the image (default /usr/local/bin/<name>)")
	flag.StringVar(&o.version, "version", "dev", "org.opencontainers.image.version label")
	flag.StringVar(&o.commit, "commit", "", "org.opencontainers.image.revision label")
	flag.IntVar(&o.uid, "uid", 65532, "user and group the image runs as (not root)")
	flag.BoolVar(&o.sharedLibs, "shared-libs", false, "also copy the shared libraries ldd lists for the binary (a cgo binary that dlopens libnvidia-ml)")
	flag.StringVar(&o.platform, "platform", "linux/amd64", "os/arch of the image")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.binary == "" || o.ref == "" || o.out == "" {
		return fmt.Errorf("--binary, --ref and --out are required")
	}
	if o.path == "" {
		o.path = "/usr/local/bin/" + baseName(o.binary)
	}
	if o.sharedLibs {
		libs, err := sharedLibraries(o.binary)
		if err != nil {
			return err
		}
		o.libs = libs
	}
	img, err := build(o)
	if err != nil {
		return err
	}
	if err := write(img, o.ref, o.out); err != nil {
		return err
	}
	fmt.Printf("%s -> %s (%s, user %d, %d shared libraries)\n", o.ref, o.out, o.path, o.uid, len(o.libs))
	return nil
}

func baseName(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}
