package enforce

import (
	"bytes"
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
)

// checkLibrary refuses a library that is missing, not a regular file, or not a shared object
// of this machine's architecture: the loader would skip it and the container run unlimited.
func checkLibrary(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("HAMi-core library: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("HAMi-core library %s is not a regular file", path)
	}
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("HAMi-core library %s is not an ELF shared object: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	want, known := HostELFMachine()
	switch {
	case f.Type != elf.ET_DYN:
		return fmt.Errorf("HAMi-core library %s is an ELF %s, not a shared object", path, f.Type)
	case known && f.Machine != want:
		return fmt.Errorf("HAMi-core library %s is built for %s, this node is %s", path, f.Machine, runtime.GOARCH)
	}
	return nil
}

// HostELFMachine is the ELF machine of the node's architecture; false when the plugin does not
// know it (the library's machine is then not checked).
func HostELFMachine() (elf.Machine, bool) {
	m, ok := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	return m, ok
}

// installFile copies src to dst unless dst holds the same bytes; running containers keep the
// file they mounted (the copy replaces dst by rename).
func installFile(src, dst string) error {
	data, err := os.ReadFile(src) //nolint:gosec // G304: the operator's flag
	if err != nil {
		return fmt.Errorf("HAMi-core library source: %w", err)
	}
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, data) { //nolint:gosec // G304: the operator's flag
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil { //nolint:gosec // G301: containers read the library
		return fmt.Errorf("install HAMi-core library: %w", err)
	}
	return writeFileAtomic(dst, data)
}

// writeFileAtomic replaces path with data (mode 0644) through a rename, when it differs.
func writeFileAtomic(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) { //nolint:gosec // G304: the plugin's own paths
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil { //nolint:gosec // G306: read by every container
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
