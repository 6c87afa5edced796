package usage

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Owner is the pod and container a process runs in, as its cgroup names them.
type Owner struct {
	// PodUID is the pod's UID (with dashes).
	PodUID string
	// ContainerID is the container runtime's ID of the container (64 hex digits), without the
	// runtime's scheme; empty when the cgroup names the pod only.
	ContainerID string
}

// podSegment matches the pod's cgroup: "pod<uid>" (cgroupfs) or
// "kubepods-besteffort-pod<uid with underscores>.slice" (systemd).
var podSegment = regexp.MustCompile(`pod([0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})(\.slice)?$`)

// containerSegment matches a container's cgroup: "<id>" (cgroupfs), or "cri-containerd-<id>.scope",
// "crio-<id>.scope", "docker-<id>.scope" (systemd).
var containerSegment = regexp.MustCompile(`^(?:[a-z-]+-)?([0-9a-f]{64})(?:\.scope)?$`)

// ErrNotInPod is returned by OwnerOf for a process outside the kubelet's pods and containers (a
// host process, or one that has exited).
var ErrNotInPod = errors.New("process is not in a pod's cgroup")

// ProcReader reads processes' cgroups under a proc filesystem root: /proc when the plugin shares
// the host's PID namespace, or where the host's /proc is mounted (e.g. /host/proc).
type ProcReader struct {
	Root string
}

// OwnerOf returns the pod and container of host process pid.
func (r ProcReader) OwnerOf(pid uint32) (Owner, error) {
	raw, err := os.ReadFile(filepath.Join(r.Root, strconv.FormatUint(uint64(pid), 10), "cgroup"))
	if errors.Is(err, fs.ErrNotExist) {
		return Owner{}, fmt.Errorf("pid %d: %w", pid, ErrNotInPod)
	}
	if err != nil {
		return Owner{}, fmt.Errorf("pid %d: %w", pid, err)
	}
	o, ok := parseCgroup(string(raw))
	if !ok {
		return Owner{}, fmt.Errorf("pid %d: %w", pid, ErrNotInPod)
	}
	return o, nil
}

// parseCgroup finds the pod and container in the lines of a /proc/<pid>/cgroup file
// ("hierarchy:controllers:path"); the first line that names a pod wins.
func parseCgroup(content string) (Owner, bool) {
	sc := bufio.NewScanner(strings.NewReader(content))
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if o, ok := parseCgroupPath(parts[2]); ok {
			return o, true
		}
	}
	return Owner{}, false
}

// parseCgroupPath reads the pod UID from the path's pod segment and the container ID from the
// segment right after it. A path without a pod segment names a container by its last segment
// that is a container ID: a kubelet run with --cgroups-per-qos=false makes no pod cgroups, and
// containerd then puts each container in /k8s.io/<id> (cgroupfs) or directly under the root.
func parseCgroupPath(path string) (Owner, bool) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for i, seg := range segs {
		m := podSegment.FindStringSubmatch(seg)
		if m == nil {
			continue
		}
		o := Owner{PodUID: strings.ReplaceAll(m[1], "_", "-")}
		if i+1 < len(segs) {
			if c := containerSegment.FindStringSubmatch(segs[i+1]); c != nil {
				o.ContainerID = c[1]
			}
		}
		return o, true
	}
	for i := len(segs) - 1; i >= 0; i-- {
		if c := containerSegment.FindStringSubmatch(segs[i]); c != nil {
			return Owner{ContainerID: c[1]}, true
		}
	}
	return Owner{}, false
}
