package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/gpushare/gpushare/pkg/deviceplugin/usage"
)

// maxAncestors bounds the walk from a process up to a container's first process.
const maxAncestors = 32

// pidOwners tells the usage sampler which container a host PID runs in: the containers are the
// processes the check started, and their descendants. It stands in for usage.ProcReader, which
// reads the pod and container from the process's cgroup (the check makes none). Safe for
// concurrent use.
type pidOwners struct {
	// proc is the proc file system (/proc).
	proc string

	mu    sync.Mutex
	roots map[uint32]usage.Owner // guarded by mu
}

var _ usage.OwnerResolver = (*pidOwners)(nil)

// newPIDOwners reads process parents from proc.
func newPIDOwners(proc string) *pidOwners {
	return &pidOwners{proc: proc, roots: map[uint32]usage.Owner{}}
}

// add records that pid is the first process of owner's container.
func (o *pidOwners) add(pid int, owner usage.Owner) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.roots[uint32(pid)] = owner //nolint:gosec // G115: a PID
}

// OwnerOf returns the container of pid or of its nearest started ancestor; usage.ErrNotInPod
// when none.
func (o *pidOwners) OwnerOf(pid uint32) (usage.Owner, error) {
	for range maxAncestors {
		o.mu.Lock()
		owner, ok := o.roots[pid]
		o.mu.Unlock()
		if ok {
			return owner, nil
		}
		parent, err := o.parent(pid)
		if err != nil || parent <= 1 {
			break
		}
		pid = parent
	}
	return usage.Owner{}, fmt.Errorf("pid %d: %w", pid, usage.ErrNotInPod)
}

// parent reads a process's parent PID from /proc/<pid>/stat.
func (o *pidOwners) parent(pid uint32) (uint32, error) {
	raw, err := os.ReadFile(filepath.Join(o.proc, strconv.FormatUint(uint64(pid), 10), "stat"))
	if err != nil {
		return 0, fmt.Errorf("pid %d: %w", pid, err)
	}
	return parseParent(string(raw))
}

// parseParent reads the parent PID from a /proc/<pid>/stat line: "pid (comm) state ppid ...",
// where comm may hold spaces and parentheses.
func parseParent(stat string) (uint32, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	fields := strings.Fields(stat[i+1:])
	if len(fields) < 2 {
		return 0, fmt.Errorf("malformed stat %q", stat)
	}
	ppid, err := strconv.ParseUint(fields[1], 10, 32)
	if err != nil {
		return 0, fmt.Errorf("stat parent %q: %w", fields[1], err)
	}
	return uint32(ppid), nil
}
