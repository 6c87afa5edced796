package enforce

import (
	"debug/elf"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gpushare/gpushare/pkg/enforce/fake"
)

// hostMachine is the ELF machine of this test's architecture.
func hostMachine(t *testing.T) elf.Machine {
	t.Helper()
	m, ok := HostELFMachine()
	if !ok {
		t.Skipf("no ELF machine known for %s", runtime.GOARCH)
	}
	return m
}

// writeELF writes an ELF header of the given type and machine (fake.WriteELF).
func writeELF(t *testing.T, path string, typ elf.Type, machine elf.Machine) {
	t.Helper()
	if err := fake.WriteELF(path, typ, machine); err != nil {
		t.Fatal(err)
	}
}

// limitConfig is HAMi-core mode with a valid library under dir.
func limitConfig(t *testing.T, dir string) Config {
	t.Helper()
	lib := filepath.Join(dir, "lib", "libvgpu.so")
	if err := os.MkdirAll(filepath.Dir(lib), 0o755); err != nil {
		t.Fatal(err)
	}
	writeELF(t, lib, elf.ET_DYN, hostMachine(t))
	return Config{Mode: ModeHAMiCore, Library: lib, StateDir: filepath.Join(dir, "state"), CollectAfter: DefaultCollectAfter}
}

// newHAMiCore builds the HAMi-core backend of cfg over mounter and fails the test unless it
// enforces.
func newHAMiCore(t *testing.T, cfg Config, mounter Mounter) *hamiCore {
	t.Helper()
	b := NewBackend(t.Context(), cfg, WithMounter(mounter))
	h, ok := b.(*hamiCore)
	if !ok {
		mode, reason := b.Mode()
		t.Fatalf("backend mode %s (%s), want %s", mode, reason, ModeHAMiCore)
	}
	return h
}
