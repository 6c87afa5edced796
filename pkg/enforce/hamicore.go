package enforce

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/apimachinery/pkg/types"
)

// What a container held by HAMi-core gets. The library is mounted at its host path; the
// preload file and the per-container counter folder at these paths.
const (
	// ContainerPreloadPath is the dynamic loader's preload list, mounted read-only: unsetting
	// LD_PRELOAD does not remove the library from a dynamically linked process.
	ContainerPreloadPath = "/etc/ld.so.preload"
	// ContainerOverridePath is a file HAMi-core reads NAME=value lines from and sets them as its
	// env; an empty file is mounted over it, read-only, so that an image cannot ship one that
	// lifts its limits.
	ContainerOverridePath = "/overrideEnv"
	// ContainerCacheDir holds the container's shared usage counters (one file, written by every
	// process of the container that uses CUDA).
	ContainerCacheDir = "/tmp/gpushare"
	// EnvMemoryLimit is HAMi-core's limit of the container's i-th visible card
	// (EnvMemoryLimit + "_" + i), in MiB with an "m" suffix.
	EnvMemoryLimit = "CUDA_DEVICE_MEMORY_LIMIT"
	// EnvSharedCache is the path of the container's counter file.
	EnvSharedCache = "CUDA_DEVICE_MEMORY_SHARED_CACHE"
	// EnvSMLimit is HAMi-core's compute cap, in percent of the card's SMs.
	EnvSMLimit = "CUDA_DEVICE_SM_LIMIT"
	// EnvDeviceOrder makes CUDA number the visible cards by PCI bus ID, the order of
	// NVIDIA_VISIBLE_DEVICES (sorted by NVML index), so that limit i is card i's.
	EnvDeviceOrder = "CUDA_DEVICE_ORDER"
)

// The preload file, the override file and the counter folders are inside Config.StateDir.
const (
	preloadFile  = "ld.so.preload"
	overrideFile = "override-env"
	podsDir      = "pods"
)

// hamiCore holds containers to their ask with HAMi-core. It keeps no mutable state after
// prepare: concurrent Prepare and Collect calls touch only the file system.
type hamiCore struct {
	cfg Config
	// cacheFile is the counter file's name, after the library's hash: HAMi-core's first process
	// fixes the file's layout, so a container restarted after a library upgrade starts a new one.
	cacheFile string
	// mounter bounds the counter folders (cfg.CounterSize).
	mounter Mounter
}

var _ Backend = (*hamiCore)(nil)

// Mode is ModeHAMiCore: prepare succeeded.
func (h *hamiCore) Mode() (mode, reason string) { return ModeHAMiCore, "" }

// prepare installs and checks the library and writes the preload and override files.
func (h *hamiCore) prepare() error {
	if h.cfg.InstallFrom != "" {
		if err := installFile(h.cfg.InstallFrom, h.cfg.Library); err != nil {
			return err
		}
	}
	if err := checkLibrary(h.cfg.Library); err != nil {
		return err
	}
	lib, err := os.ReadFile(h.cfg.Library)
	if err != nil {
		return fmt.Errorf("HAMi-core library: %w", err)
	}
	sum := sha256.Sum256(lib)
	h.cacheFile = "vgpu-" + hex.EncodeToString(sum[:6]) + ".cache"
	if err := os.MkdirAll(filepath.Join(h.cfg.StateDir, podsDir), 0o755); err != nil { //nolint:gosec // G301: containers read below it
		return fmt.Errorf("HAMi-core state folder: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(h.cfg.StateDir, overrideFile), nil); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(h.cfg.StateDir, preloadFile), []byte(h.cfg.Library+"\n"))
}

// Prepare makes the container's counter folder, bounded by a tmpfs of cfg.CounterSize
// (boundCounters) as the last step that can fail, so that no error leaves a mount behind, and
// returns the mounts and env that hold it to its ask.
func (h *hamiCore) Prepare(req Request) (Edits, error) {
	dir, err := h.containerDir(req.PodUID, req.Container)
	if err != nil {
		return Edits{}, err
	}
	// HAMi-core creates the counter file, but not its folder, as whatever user the container
	// runs as: the folder is open to all, as /tmp is.
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // G301: made open to all just below
		return Edits{}, fmt.Errorf("pod %s container %s: counter folder: %w", req.Pod, req.Container, err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		return Edits{}, fmt.Errorf("pod %s container %s: counter folder: %w", req.Pod, req.Container, err)
	}
	if err := h.boundCounters(dir); err != nil {
		return Edits{}, fmt.Errorf("pod %s container %s: %w", req.Pod, req.Container, err)
	}
	return Edits{Mounts: h.mounts(dir), Env: h.env(req)}, nil
}

// env is HAMi-core's configuration of the container: its counter file, the card order, a
// limit per card and the compute cap.
func (h *hamiCore) env(req Request) map[string]string {
	env := map[string]string{
		EnvSharedCache: ContainerCacheDir + "/" + h.cacheFile,
		EnvDeviceOrder: "PCI_BUS_ID",
	}
	for i, b := range req.CardBytes {
		env[EnvMemoryLimit+"_"+strconv.Itoa(i)] = strconv.FormatInt(b>>20, 10) + "m"
	}
	if req.CorePercent > 0 {
		env[EnvSMLimit] = strconv.Itoa(req.CorePercent)
	}
	return env
}

// mounts are the library, the preload and override files (read-only) and the counter folder
// dir.
func (h *hamiCore) mounts(dir string) []Mount {
	return []Mount{
		{ContainerPath: h.cfg.Library, HostPath: h.cfg.Library, ReadOnly: true},
		{ContainerPath: ContainerPreloadPath, HostPath: h.cfg.PreloadHostPath(), ReadOnly: true},
		{ContainerPath: ContainerOverridePath, HostPath: filepath.Join(h.cfg.StateDir, overrideFile), ReadOnly: true},
		{ContainerPath: ContainerCacheDir, HostPath: dir},
	}
}

// ContainerPaths are the destinations of mounts: the library, the preload, the override file
// and the counter folder.
func (h *hamiCore) ContainerPaths() []string {
	ms := h.mounts("")
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ContainerPath
	}
	return out
}

// containerDir is the host folder of one container's counters.
func (h *hamiCore) containerDir(uid types.UID, container string) (string, error) {
	u, c := string(uid), container
	if u == "" || c == "" || filepath.Base(u) != u || filepath.Base(c) != c || u == ".." || c == ".." {
		return "", fmt.Errorf("pod UID %q or container name %q cannot name a folder", u, c)
	}
	return filepath.Join(h.cfg.StateDir, podsDir, u, c), nil
}
