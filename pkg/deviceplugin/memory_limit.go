package deviceplugin

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/contract"
)

// Memory limit modes (--memory-limit): how containers are held to the GPU memory they asked.
const (
	// MemoryLimitNone shares cards without limits: a container may use a whole card.
	MemoryLimitNone = contract.MemoryLimitNone
	// MemoryLimitHAMiCore preloads HAMi-core into every container Allocate admits, with a limit
	// per card (and an optional compute cap).
	MemoryLimitHAMiCore = contract.MemoryLimitHAMiCore
)

// Defaults of MemoryLimitConfig: host paths, each mounted at the same path in the plugin's
// container.
const (
	DefaultHAMiCoreLibrary  = "/usr/local/gpushare/hami-core/libvgpu.so"
	DefaultMemoryLimitState = "/var/lib/gpushare/hami-core"
)

// What a container admitted under HAMi-core gets. The library is mounted at its host path;
// the preload file and the per-container counter folder at these paths.
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

// ReasonMemoryLimitUnavailable is the Warning event on a pod admitted without the memory limit
// the node's plugin was asked to enforce.
const ReasonMemoryLimitUnavailable = "GPUMemoryLimitUnavailable"

// preloadFile and podsDir are inside MemoryLimitConfig.StateDir.
const (
	preloadFile  = "ld.so.preload"
	overrideFile = "override-env"
	podsDir      = "pods"
)

// DefaultCollectAfter keeps a pod's counter folder this long after it was last written even
// when the pod is not listed: the pod source may lag the Allocate that made it.
const DefaultCollectAfter = time.Minute

// MemoryLimitConfig says how the plugin holds containers to their ask (WithMemoryLimit).
type MemoryLimitConfig struct {
	// Mode is MemoryLimitNone or MemoryLimitHAMiCore.
	Mode string
	// Library is the absolute host path of HAMi-core's libvgpu.so; containers get it read-only
	// at the same path.
	Library string
	// InstallFrom, when set, is a file (the copy in the plugin's image) that the plugin copies
	// to Library at start, unless Library already holds the same bytes.
	InstallFrom string
	// StateDir is an absolute host folder for the preload file and one counter folder per
	// container (StateDir/pods/<pod UID>/<container>), removed when the pod is gone.
	StateDir string
	// CounterSize bounds each container's counter folder, in bytes: the plugin mounts a tmpfs
	// of that size on it (see counter_tmpfs.go), which needs CAP_SYS_ADMIN and the state folder
	// mounted with Bidirectional propagation. 0 hands out plain host folders, unbounded: a
	// container may then fill the node's disk through its folder. DefaultMemoryLimitConfig sets
	// DefaultCounterSize.
	CounterSize int64
	// CollectAfter is how long a gone pod's folder is kept after it was last written.
	CollectAfter time.Duration
}

// PreloadHostPath is the host file the plugin mounts at ContainerPreloadPath.
func (c *MemoryLimitConfig) PreloadHostPath() string { return filepath.Join(c.StateDir, preloadFile) }

// DefaultMemoryLimitConfig is no limits, with HAMi-core's default paths.
func DefaultMemoryLimitConfig() MemoryLimitConfig {
	return MemoryLimitConfig{Mode: MemoryLimitNone, Library: DefaultHAMiCoreLibrary, StateDir: DefaultMemoryLimitState,
		CollectAfter: DefaultCollectAfter, CounterSize: DefaultCounterSize}
}

// WithMemoryLimit sets how containers are held to the memory they asked. Default
// DefaultMemoryLimitConfig (none).
func WithMemoryLimit(c MemoryLimitConfig) Option { return func(cfg *config) { cfg.memoryLimit = c } }

// ValidateMemoryLimit reports what is wrong with c (New checks it too).
func ValidateMemoryLimit(c MemoryLimitConfig) error { return c.validate() }

func (c *MemoryLimitConfig) validate() error {
	switch c.Mode {
	case MemoryLimitNone:
		return nil
	case MemoryLimitHAMiCore:
	default:
		return fmt.Errorf("%w: memory limit mode %q: want %s or %s", ErrInvalidConfig, c.Mode, MemoryLimitHAMiCore, MemoryLimitNone)
	}
	for what, path := range map[string]string{"library": c.Library, "state folder": c.StateDir} {
		if !filepath.IsAbs(path) || filepath.Clean(path) != path {
			return fmt.Errorf("%w: HAMi-core %s %q must be an absolute, clean path (it is mounted into containers)", ErrInvalidConfig, what, path)
		}
	}
	if c.CollectAfter < 0 {
		return fmt.Errorf("%w: HAMi-core collect-after %s is negative", ErrInvalidConfig, c.CollectAfter)
	}
	if c.CounterSize < 0 || (c.CounterSize > 0 && c.CounterSize < MinCounterSize) {
		return fmt.Errorf("%w: HAMi-core counter size %d bytes: want 0 (unbounded) or at least %d, the size of HAMi-core's counter file",
			ErrInvalidConfig, c.CounterSize, MinCounterSize)
	}
	if c.InstallFrom != "" && !filepath.IsAbs(c.InstallFrom) {
		return fmt.Errorf("%w: HAMi-core library source %q must be an absolute path", ErrInvalidConfig, c.InstallFrom)
	}
	if filepath.Dir(c.Library) == ContainerCacheDir || c.Library == ContainerPreloadPath || c.Library == ContainerOverridePath {
		return fmt.Errorf("%w: HAMi-core library %q collides with a path the plugin mounts", ErrInvalidConfig, c.Library)
	}
	return nil
}

// limiter applies the memory limit mode to each container Allocate admits.
type limiter struct {
	cfg MemoryLimitConfig
	// mode is what containers get: the configured mode, or contract.MemoryLimitUnavailable
	// when HAMi-core was asked for and could not be prepared (reason says why).
	mode   string
	reason string
	// cacheFile is the counter file's name, after the library's hash: HAMi-core's first process
	// fixes the file's layout, so a container restarted after a library upgrade starts a new one.
	cacheFile string
	// mounter bounds the counter folders (cfg.CounterSize).
	mounter counterMounter
}

// newLimiter prepares the configured mode: with HAMi-core it installs and checks the library,
// writes the preload file and makes the counter folder. A failure does not stop the plugin; it
// leaves the node without limits, said in the log, the node annotation, the metrics and an
// event on every pod admitted so.
func newLimiter(ctx context.Context, cfg MemoryLimitConfig, mounter counterMounter) *limiter {
	l := &limiter{cfg: cfg, mode: cfg.Mode, mounter: mounter}
	if cfg.Mode != MemoryLimitHAMiCore {
		klog.FromContext(ctx).Info("GPU memory limits are off: containers may use whole cards", "memoryLimit", cfg.Mode)
		return l
	}
	if err := l.prepare(); err != nil {
		l.mode, l.reason = contract.MemoryLimitUnavailable, err.Error()
		klog.FromContext(ctx).Error(err, "GPU MEMORY LIMITS UNAVAILABLE: containers on this node are NOT held to the memory they ask",
			"memoryLimit", cfg.Mode, "library", cfg.Library)
		return l
	}
	klog.FromContext(ctx).Info("GPU memory limits on: every container is held to its ask by HAMi-core",
		"library", cfg.Library, "stateDir", cfg.StateDir, "counterSizeBytes", cfg.CounterSize)
	return l
}

// Mode is the effective mode (MemoryLimitHAMiCore, MemoryLimitNone or
// contract.MemoryLimitUnavailable) and, when unavailable, why.
func (l *limiter) Mode() (mode, reason string) { return l.mode, l.reason }

// enforced says whether containers get limits.
func (l *limiter) enforced() bool { return l.mode == MemoryLimitHAMiCore }

func (l *limiter) prepare() error {
	if l.cfg.InstallFrom != "" {
		if err := installFile(l.cfg.InstallFrom, l.cfg.Library); err != nil {
			return err
		}
	}
	if err := checkLibrary(l.cfg.Library); err != nil {
		return err
	}
	lib, err := os.ReadFile(l.cfg.Library)
	if err != nil {
		return fmt.Errorf("HAMi-core library: %w", err)
	}
	sum := sha256.Sum256(lib)
	l.cacheFile = "vgpu-" + hex.EncodeToString(sum[:6]) + ".cache"
	if err := os.MkdirAll(filepath.Join(l.cfg.StateDir, podsDir), 0o755); err != nil { //nolint:gosec // G301: containers read below it
		return fmt.Errorf("HAMi-core state folder: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(l.cfg.StateDir, overrideFile), nil); err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(l.cfg.StateDir, preloadFile), []byte(l.cfg.Library+"\n"))
}

// checkLibrary refuses a library that is missing, not a regular file, or not a shared object
// of this machine's architecture: the loader would skip it and the container run unlimited.
func checkLibrary(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("HAMi-core library: %w", err)
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("HAMi-core library %s is not a regular file", path)
	}
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("HAMi-core library %s is not an ELF shared object: %w", path, err)
	}
	defer func() { _ = f.Close() }()
	want, known := HostELFMachine()
	switch {
	case f.Type != elf.ET_DYN:
		return fmt.Errorf("HAMi-core library %s is an ELF %s, not a shared object", path, f.Type)
	case known && f.Machine != want:
		return fmt.Errorf("HAMi-core library %s is built for %s, this node is %s", path, f.Machine, runtime.GOARCH)
	}
	return nil
}

// HostELFMachine is the ELF machine of the node's architecture; false when the plugin does not
// know it (the library's machine is then not checked).
func HostELFMachine() (elf.Machine, bool) {
	m, ok := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[runtime.GOARCH]
	return m, ok
}

// installFile copies src to dst unless dst holds the same bytes; running containers keep the
// file they mounted (the copy replaces dst by rename).
func installFile(src, dst string) error {
	data, err := os.ReadFile(src) //nolint:gosec // G304: the operator's flag
	if err != nil {
		return fmt.Errorf("HAMi-core library source: %w", err)
	}
	if old, err := os.ReadFile(dst); err == nil && bytes.Equal(old, data) { //nolint:gosec // G304: the operator's flag
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil { //nolint:gosec // G301: containers read the library
		return fmt.Errorf("install HAMi-core library: %w", err)
	}
	return writeFileAtomic(dst, data)
}

// writeFileAtomic replaces path with data (mode 0644) through a rename, when it differs.
func writeFileAtomic(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) { //nolint:gosec // G304: the plugin's own paths
		return nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil { //nolint:gosec // G306: read by every container
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// containerLimits returns the mounts and env that hold a container to its ask on its cards
// (perCard: its units on each card it sees, in the order of NVIDIA_VISIBLE_DEVICES), and makes
// its counter folder, bounded by a tmpfs of cfg.CounterSize (boundCounters) as the last step
// that can fail, so that no error leaves a mount behind. Without enforcement it returns nothing.
func (l *limiter) containerLimits(pod *v1.Pod, container string, perCard []int64, unitBytes int64, corePercent int) ([]*pluginapi.Mount, map[string]string, error) {
	if !l.enforced() {
		return nil, nil, nil
	}
	dir, err := l.containerDir(pod.UID, container)
	if err != nil {
		return nil, nil, err
	}
	// HAMi-core creates the counter file, but not its folder, as whatever user the container
	// runs as: the folder is open to all, as /tmp is.
	if err := os.MkdirAll(dir, 0o755); err != nil { //nolint:gosec // G301: made open to all just below
		return nil, nil, fmt.Errorf("pod %s container %s: counter folder: %w", klog.KObj(pod), container, err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		return nil, nil, fmt.Errorf("pod %s container %s: counter folder: %w", klog.KObj(pod), container, err)
	}
	if err := l.boundCounters(dir); err != nil {
		return nil, nil, fmt.Errorf("pod %s container %s: %w", klog.KObj(pod), container, err)
	}
	env := map[string]string{
		EnvSharedCache: ContainerCacheDir + "/" + l.cacheFile,
		EnvDeviceOrder: "PCI_BUS_ID",
	}
	for i, units := range perCard {
		env[EnvMemoryLimit+"_"+strconv.Itoa(i)] = strconv.FormatInt(units*unitBytes>>20, 10) + "m"
	}
	if corePercent > 0 {
		env[EnvSMLimit] = strconv.Itoa(corePercent)
	}
	mounts := []*pluginapi.Mount{
		{ContainerPath: l.cfg.Library, HostPath: l.cfg.Library, ReadOnly: true},
		{ContainerPath: ContainerPreloadPath, HostPath: filepath.Join(l.cfg.StateDir, preloadFile), ReadOnly: true},
		{ContainerPath: ContainerOverridePath, HostPath: filepath.Join(l.cfg.StateDir, overrideFile), ReadOnly: true},
		{ContainerPath: ContainerCacheDir, HostPath: dir},
	}
	return mounts, env, nil
}

// containerDir is the host folder of one container's counters.
func (l *limiter) containerDir(uid types.UID, container string) (string, error) {
	u, c := string(uid), container
	if u == "" || c == "" || filepath.Base(u) != u || filepath.Base(c) != c || u == ".." || c == ".." {
		return "", fmt.Errorf("pod UID %q or container name %q cannot name a folder", u, c)
	}
	return filepath.Join(l.cfg.StateDir, podsDir, u, c), nil
}

// collect removes the counter folders of pods that are gone from the node (not in pods) and
// were not written for CollectAfter, unmounting their tmpfs first.
func (l *limiter) collect(ctx context.Context, pods []*v1.Pod, now time.Time) {
	if !l.enforced() {
		return
	}
	root := filepath.Join(l.cfg.StateDir, podsDir)
	entries, err := os.ReadDir(root)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Listing HAMi-core counter folders failed")
		return
	}
	live := make(map[string]bool, len(pods))
	for _, p := range pods {
		live[string(p.UID)] = true
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || live[e.Name()] || now.Sub(info.ModTime()) < l.cfg.CollectAfter {
			continue
		}
		if err := l.removeCounters(filepath.Join(root, e.Name())); err != nil {
			klog.FromContext(ctx).Error(err, "Removing a gone pod's HAMi-core counters failed", "podUID", e.Name())
			continue
		}
		klog.FromContext(ctx).V(2).Info("Removed a gone pod's HAMi-core counters", "podUID", e.Name())
	}
}
