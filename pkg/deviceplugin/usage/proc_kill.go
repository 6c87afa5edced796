package usage

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// ErrProcessGone is returned by Killer.Kill for a process that has already exited.
var ErrProcessGone = errors.New("process has exited")

// ErrOwnerChanged is returned by Killer.Kill for a PID that no longer runs in the container it
// was seen in (the PID was reused, or the process moved): it is not signalled.
var ErrOwnerChanged = errors.New("process no longer runs in the container it was seen in")

// ErrForeignPIDNamespace is returned by ProcKiller when the kernel refuses to signal through a
// /proc/<pid> descriptor because the target is not in the plugin's PID namespace or below it:
// the plugin must share the host's PID namespace (hostPID: true) to kill containers' processes.
var ErrForeignPIDNamespace = errors.New("the process is outside the plugin's PID namespace: the plugin needs hostPID: true to signal it")

// Killer ends host processes. Kill sends SIGKILL to host process pid if it still runs in owner's
// container (ErrOwnerChanged otherwise, ErrProcessGone when it has exited).
type Killer interface {
	Kill(pid uint32, owner Owner) error
}

// ProcKiller kills through the proc filesystem at Root (the host's /proc, or where it is
// mounted): it opens /proc/<pid>, reads the process's cgroup through that descriptor and sends
// the signal with pidfd_send_signal on the same descriptor. The descriptor names one process,
// not a PID number: if the process exits and its PID is reused between the check and the
// signal, the read or the signal fails with ESRCH instead of hitting the newcomer. The kernel
// accepts it only for processes in the plugin's PID namespace or below: the plugin needs
// hostPID: true (ErrForeignPIDNamespace otherwise), and CAP_KILL for processes of other users.
type ProcKiller struct {
	Root string
}

var _ Killer = ProcKiller{}

// Kill sends SIGKILL to pid if its cgroup still names owner.
func (k ProcKiller) Kill(pid uint32, owner Owner) error {
	fd, err := k.open(pid)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	raw, err := readAt(fd, "cgroup")
	if err != nil {
		return fmt.Errorf("pid %d: %w", pid, procError(err))
	}
	if got, ok := parseCgroup(raw); !ok || got != owner {
		return fmt.Errorf("pid %d: %w", pid, ErrOwnerChanged)
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
		return fmt.Errorf("pid %d: kill: %w", pid, signalError(err))
	}
	return nil
}

// Check says whether the plugin can signal the host's processes: it sends signal 0 (which
// checks and delivers nothing) to the host's init through its /proc entry.
func (k ProcKiller) Check() error {
	fd, err := k.open(1)
	if err != nil {
		return err
	}
	defer func() { _ = unix.Close(fd) }()
	if err := unix.PidfdSendSignal(fd, 0, nil, 0); err != nil {
		return fmt.Errorf("signal the host's processes through %s: %w", k.Root, signalError(err))
	}
	return nil
}

// open opens the /proc directory of pid.
func (k ProcKiller) open(pid uint32) (int, error) {
	dir := filepath.Join(k.Root, strconv.FormatUint(uint64(pid), 10))
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("pid %d: open %s: %w", pid, dir, procError(err))
	}
	return fd, nil
}

// readAt reads the file name in the directory dirfd.
func readAt(dirfd int, name string) (string, error) {
	fd, err := unix.Openat(dirfd, name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	f := os.NewFile(uintptr(fd), name)
	defer func() { _ = f.Close() }()
	raw, err := io.ReadAll(f)
	return string(raw), err
}

// procError names the errno of a process that has gone.
func procError(err error) error {
	if errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("%w (%w)", ErrProcessGone, err)
	}
	return err
}

// signalError names the errno of pidfd_send_signal: EINVAL for a process outside the caller's
// PID namespace (a valid descriptor and signal being given).
func signalError(err error) error {
	if errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("%w (%w)", ErrForeignPIDNamespace, err)
	}
	return procError(err)
}
