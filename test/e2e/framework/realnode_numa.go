package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// RealNodeOptions shape a real node (StartRealNodeWith).
type RealNodeOptions struct {
	// Taints are registered with the node, e.g. "key=value:NoSchedule".
	Taints []string
	// KubeletConfig is appended to the kubelet's KubeletConfiguration: YAML fields such as
	// cpuManagerPolicy or topologyManagerPolicy.
	KubeletConfig string
	// TwoNUMANodes shows the kubelet, and nothing else, two NUMA nodes whatever the machine
	// has: node 0 holding CPU 0 and node 1 the other CPUs (at least two), the memory split
	// evenly (withTwoNUMANodes).
	TwoNUMANodes bool
	// ContainerdV2 runs the node on the containerd v2 that hack/e2e-bins.sh builds into the bin
	// folder (containerd and containerd-shim-runc-v2) instead of the host's v1.6, with CDI
	// specs read from CDISpecDir (containerdV2Config); runc stays the host's.
	ContainerdV2 bool
}

// sysNodeDir is where the kernel lists NUMA nodes and cadvisor reads them.
const sysNodeDir = "/sys/devices/system/node"

// withTwoNUMANodes writes a NUMA node folder with two nodes (RealNodeOptions.TwoNUMANodes)
// and returns the command that runs the kubelet (bin args) in a mount namespace of its own
// with that folder mounted over /sys/devices/system/node. The kubelet learns the machine's
// NUMA nodes from cadvisor, which reads them there; the CPUs stay the real ones (each node's
// cpuN links to /sys/devices/system/cpu/cpuN). The namespace's propagation is slave: the
// host's mounts reach the kubelet, its own stay in it, so pods on this node must not need
// volumes the kubelet mounts (the real-node tests' pods have none).
func (n *RealNode) withTwoNUMANodes(bin string, args []string) (string, []string, error) {
	dir := filepath.Join(n.kubeletDir, "numa")
	cpus, err := machineCPUs()
	if err != nil {
		return "", nil, err
	}
	if len(cpus) < 2 {
		return "", nil, fmt.Errorf("two NUMA nodes need two CPUs, this machine has %d", len(cpus))
	}
	memKB, err := memTotalKB()
	if err != nil {
		return "", nil, err
	}
	nodes := [][]int{cpus[:1], cpus[1:]}
	for id, nodeCPUs := range nodes {
		if err := writeNUMANode(dir, id, nodeCPUs, memKB/2); err != nil {
			return "", nil, err
		}
	}
	for _, f := range []string{"online", "possible", "has_cpu", "has_memory", "has_normal_memory"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("0-1\n"), 0o644); err != nil {
			return "", nil, err
		}
	}
	script := `mount --bind "$1" ` + sysNodeDir + ` && shift && exec "$@"`
	return "unshare", append([]string{"--mount", "--propagation", "slave", "--", "sh", "-c", script, "sh", dir, bin}, args...), nil
}

// writeNUMANode writes node id's folder: a link per CPU, its memory and its distances.
func writeNUMANode(dir string, id int, cpus []int, memKB int64) error {
	nd := filepath.Join(dir, "node"+strconv.Itoa(id))
	if err := os.MkdirAll(nd, 0o755); err != nil {
		return err
	}
	for _, c := range cpus {
		name := "cpu" + strconv.Itoa(c)
		if err := os.Symlink(filepath.Join("/sys/devices/system/cpu", name), filepath.Join(nd, name)); err != nil {
			return err
		}
	}
	mem := fmt.Sprintf("Node %d MemTotal:       %d kB\nNode %d MemFree:        %d kB\n", id, memKB, id, memKB)
	if err := os.WriteFile(filepath.Join(nd, "meminfo"), []byte(mem), 0o644); err != nil {
		return err
	}
	dist := map[int]string{0: "10 20\n", 1: "20 10\n"}[id]
	return os.WriteFile(filepath.Join(nd, "distance"), []byte(dist), 0o644)
}

// machineCPUs lists the machine's CPU numbers, sorted.
func machineCPUs() ([]int, error) {
	paths, err := filepath.Glob("/sys/devices/system/cpu/cpu[0-9]*")
	if err != nil {
		return nil, err
	}
	re := regexp.MustCompile(`/cpu([0-9]+)$`)
	var out []int
	for _, p := range paths {
		if m := re.FindStringSubmatch(p); m != nil {
			n, _ := strconv.Atoi(m[1])
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

// memTotalKB is MemTotal of /proc/meminfo.
func memTotalKB() (int64, error) {
	raw, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no MemTotal in /proc/meminfo")
}
