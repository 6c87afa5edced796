package framework

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// containerdV2Bins are the containerd v2 programs hack/e2e-bins.sh builds into the bin folder
// (RealNodeOptions.ContainerdV2); runc, ctr and busybox stay the host's (NodeTools).
func containerdV2Bins() []string { return []string{"containerd", "containerd-shim-runc-v2"} }

// MissingContainerdV2 lists the containerd v2 programs absent from the bin folder bin.
func MissingContainerdV2(bin string) []string {
	var missing []string
	for _, b := range containerdV2Bins() {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			missing = append(missing, b)
		}
	}
	return missing
}

// CDISpecDir is the folder the node's containerd v2 reads Container Device Interface specs
// from (its only cdi_spec_dirs entry): the tests and a DRA driver write theirs there.
func (n *RealNode) CDISpecDir() string { return filepath.Join(n.c.Dir, "cdi") }

// PluginRegistryDir is the folder where the kubelet watches for plugin registration sockets
// (plugins_registry under its --root-dir, not /var/lib/kubelet).
func (n *RealNode) PluginRegistryDir() string {
	return filepath.Join(n.kubeletDir, "root", "plugins_registry")
}

// PluginDataDir is the folder of a kubelet plugin's own sockets for driver (plugins/<driver>
// under the kubelet's --root-dir); PluginDataDir does not create it.
func (n *RealNode) PluginDataDir(driver string) string {
	return filepath.Join(n.kubeletDir, "root", "plugins", driver)
}

// containerdV2 returns the containerd v2 program of the bin folder and its configuration
// (containerdV2Config), and creates the CDI spec folder, which containerd watches.
func (n *RealNode) containerdV2() (string, string, error) {
	if m := MissingContainerdV2(n.c.Bin); len(m) > 0 {
		return "", "", fmt.Errorf("containerd v2 programs %v missing from %s (make e2e-bins builds them)", m, n.c.Bin)
	}
	if err := os.MkdirAll(n.CDISpecDir(), 0o755); err != nil {
		return "", "", fmt.Errorf("CDI spec folder: %w", err)
	}
	cfg := containerdV2Config(n.ctrdDir, n.socket, n.CDISpecDir(), filepath.Join(n.c.Bin, "containerd-shim-runc-v2"))
	return filepath.Join(n.c.Bin, "containerd"), cfg, nil
}

// containerdV2Config is the version 3 configuration (containerd 2.0 and later; 2.3 and later
// migrate it to their version 4 at start, with one warning line) of the v1.6 one in
// containerdV1Config: the CRI plugin is split into io.containerd.cri.v1.images (snapshotter,
// sandbox image) and io.containerd.cri.v1.runtime. CDI is always on in 2.4 (enable_cdi was
// removed), reading specs from cdiDir only. The runc shim is the one built beside containerd
// (runtime_path), not the host's v1.6 shim that PATH would find first. NRI is off: its socket
// would be /var/run/nri, outside the cluster folder.
func containerdV2Config(ctrdDir, socket, cdiDir, shim string) string {
	return fmt.Sprintf(`version = 3
root = "%[1]s/root"
state = "%[1]s/state"
[grpc]
  address = "%[2]s"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "%[3]s"
[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  cdi_spec_dirs = ["%[4]s"]
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      runtime_path = "%[5]s"
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    conf_dir = "%[1]s/cni"
[plugins.'io.containerd.nri.v1.nri']
  disable = true
`, ctrdDir, socket, LocalImage, cdiDir, shim)
}

// CDISpec is the part of a Container Device Interface spec (cdiVersion 0.6.0) the tests
// write: devices of one kind ("vendor/class") with the edits each brings to a container.
type CDISpec struct {
	Version string      `json:"cdiVersion"`
	Kind    string      `json:"kind"`
	Devices []CDIDevice `json:"devices"`
}

// CDIDevice is one device of a CDISpec; its ID is "<kind>=<name>".
type CDIDevice struct {
	Name           string   `json:"name"`
	ContainerEdits CDIEdits `json:"containerEdits"`
}

// CDIEdits are what a CDI device adds to a container: environment variables ("NAME=value")
// and mounts.
type CDIEdits struct {
	Env    []string   `json:"env,omitempty"`
	Mounts []CDIMount `json:"mounts,omitempty"`
}

// CDIMount is a mount of a CDI device, e.g. a host file bind-mounted read-only.
type CDIMount struct {
	HostPath      string   `json:"hostPath"`
	ContainerPath string   `json:"containerPath"`
	Options       []string `json:"options,omitempty"`
}

// WriteCDISpec writes spec as JSON to file (a base name ending in .json) in CDISpecDir, through
// a temporary name that containerd's spec watcher ignores, so that it never reads half a spec.
func (n *RealNode) WriteCDISpec(file string, spec CDISpec) error {
	raw, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("CDI spec %s: %w", file, err)
	}
	path := filepath.Join(n.CDISpecDir(), file)
	if err := os.WriteFile(path+".tmp", raw, 0o644); err != nil {
		return fmt.Errorf("CDI spec %s: %w", file, err)
	}
	return os.Rename(path+".tmp", path)
}
