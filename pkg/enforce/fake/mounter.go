// Package fake holds fakes of the enforce package's dependencies for tests.
package fake

import (
	"fmt"
	"os"
	"sync"
)

// Mounter stands in for the real tmpfs mounts of enforce's counter folders where tests cannot
// (or should not) mount: it records the folders mounted, with their size, and those unmounted,
// in order. It implements enforce.Mounter; read its fields once the calls are over.
type Mounter struct {
	mu sync.Mutex
	// Mounted maps each folder mounted and not unmounted since to its size.
	Mounted map[string]int64
	// Unmounted lists the folders Unmount was called on, in order.
	Unmounted []string
	// FailMount and FailUnmount, when set, are the errors of every Mount and Unmount.
	FailMount, FailUnmount error
}

// Mount records dir as mounted with size bytes; dir must exist.
func (f *Mounter) Mount(dir string, size int64) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.FailMount != nil {
		return f.FailMount
	}
	if _, err := os.Stat(dir); err != nil {
		return fmt.Errorf("mount on a folder that is not there: %w", err)
	}
	if f.Mounted == nil {
		f.Mounted = map[string]int64{}
	}
	f.Mounted[dir] = size
	return nil
}

// Unmount records dir as unmounted; a mounted dir must still exist.
func (f *Mounter) Unmount(dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.FailUnmount != nil {
		return f.FailUnmount
	}
	if _, ok := f.Mounted[dir]; ok {
		if _, err := os.Stat(dir); err != nil {
			return fmt.Errorf("unmount after the folder was removed: %w", err)
		}
		delete(f.Mounted, dir)
	}
	f.Unmounted = append(f.Unmounted, dir)
	return nil
}
