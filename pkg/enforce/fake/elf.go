package fake

import (
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
)

// WriteELF writes a 64-bit little-endian ELF header of the given type and machine at path: all
// the enforce backend reads of the HAMi-core library (enforce.HostELFMachine names this machine's).
// A dynamic loader refuses it.
func WriteELF(path string, typ elf.Type, machine elf.Machine) error {
	hdr := elf.Header64{
		Ident:   [elf.EI_NIDENT]byte{0x7f, 'E', 'L', 'F', byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)},
		Type:    uint16(typ),
		Machine: uint16(machine),
		Version: uint32(elf.EV_CURRENT),
		Ehsize:  64,
	}
	f, err := os.Create(path) //nolint:gosec // G304: the caller's test file
	if err != nil {
		return fmt.Errorf("write ELF header: %w", err)
	}
	if err := binary.Write(f, binary.LittleEndian, &hdr); err != nil {
		_ = f.Close()
		return fmt.Errorf("write ELF header %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write ELF header %s: %w", path, err)
	}
	return nil
}
