package framework

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// DevicePluginLock is the file whose exclusive flock(2) a process holds while it owns
// DevicePluginDir. It lives outside /var/lib/kubelet so that removing the kubelet's folders
// never unlinks a held lock.
const DevicePluginLock = "/run/lock/gpushare-e2e-device-plugins.lock"

// LockDevicePluginDir takes the machine-wide lock on DevicePluginDir, waiting up to wait for
// another test process (a second `go test`, a CI run beside a developer's) to release it.
// Holding the lock means no live test owns the folder, so a DevicePluginDir still present was
// left behind by a process that died (SIGKILL, a machine stopped mid-run): it is removed, and
// logf says so. The returned func releases the lock and removes the folder.
func LockDevicePluginDir(wait time.Duration, logf func(format string, args ...any)) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(DevicePluginLock), 0o755); err != nil {
		return nil, fmt.Errorf("lock folder: %w", err)
	}
	f, err := os.OpenFile(DevicePluginLock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", DevicePluginLock, err)
	}
	deadline := time.Now().Add(wait)
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("flock %s: %w", DevicePluginLock, err)
		}
		if time.Now().After(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("%s still held after %s: another kubelet or device-manager test is running on this machine", DevicePluginLock, wait)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if _, err := os.Stat(DevicePluginDir); err == nil {
		logf("%s was left behind by a test process that died; removing it", DevicePluginDir)
		if err := os.RemoveAll(DevicePluginDir); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("remove stale %s: %w", DevicePluginDir, err)
		}
	}
	return func() {
		_ = os.RemoveAll(DevicePluginDir)
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
