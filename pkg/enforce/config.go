package enforce

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/gpushare/gpushare/pkg/contract"
)

// Modes (--memory-limit): how containers are held to the GPU memory they asked.
const (
	// ModeNone shares cards without limits: a container may use a whole card.
	ModeNone = contract.MemoryLimitNone
	// ModeHAMiCore preloads HAMi-core into every container, with a limit per card (and an
	// optional compute cap).
	ModeHAMiCore = contract.MemoryLimitHAMiCore
	// ModeUnavailable is the effective mode when HAMi-core was asked for and could not be
	// prepared: containers get no limits.
	ModeUnavailable = contract.MemoryLimitUnavailable
)

// Defaults of Config: host paths, each mounted at the same path in the plugin's container.
const (
	DefaultHAMiCoreLibrary = "/usr/local/gpushare/hami-core/libvgpu.so"
	DefaultStateDir        = "/var/lib/gpushare/hami-core"
)

// DefaultCollectAfter keeps a pod's counter folder this long after it was last written even
// when the pod is not listed: the pod source may lag the Prepare that made it.
const DefaultCollectAfter = time.Minute

// Config says how containers are held to their ask.
type Config struct {
	// Mode is ModeNone or ModeHAMiCore.
	Mode string
	// Library is the absolute host path of HAMi-core's libvgpu.so; containers get it read-only
	// at the same path.
	Library string
	// InstallFrom, when set, is a file (the copy in the plugin's image) that the backend copies
	// to Library at start, unless Library already holds the same bytes.
	InstallFrom string
	// StateDir is an absolute host folder for the preload file and one counter folder per
	// container (StateDir/pods/<pod UID>/<container>), removed when the pod is gone.
	StateDir string
	// CounterSize bounds each container's counter folder, in bytes: the backend mounts a tmpfs
	// of that size on it (see counter_tmpfs.go), which needs CAP_SYS_ADMIN and the state folder
	// mounted with Bidirectional propagation. 0 hands out plain host folders, unbounded: a
	// container may then fill the node's disk through its folder. DefaultConfig sets
	// DefaultCounterSize.
	CounterSize int64
	// CollectAfter is how long a gone pod's folder is kept after it was last written.
	CollectAfter time.Duration
}

// DefaultConfig is no limits, with HAMi-core's default paths.
func DefaultConfig() Config {
	return Config{Mode: ModeNone, Library: DefaultHAMiCoreLibrary, StateDir: DefaultStateDir,
		CollectAfter: DefaultCollectAfter, CounterSize: DefaultCounterSize}
}

// PreloadHostPath is the host file mounted at ContainerPreloadPath.
func (c *Config) PreloadHostPath() string { return filepath.Join(c.StateDir, preloadFile) }

// Validate reports what is wrong with c. Its errors wrap no sentinel: callers wrap them in
// their own (the device plugin's ErrInvalidConfig).
func (c *Config) Validate() error {
	switch c.Mode {
	case ModeNone:
		return nil
	case ModeHAMiCore:
	default:
		return fmt.Errorf("memory limit mode %q: want %s or %s", c.Mode, ModeHAMiCore, ModeNone)
	}
	for what, path := range map[string]string{"library": c.Library, "state folder": c.StateDir} {
		if !filepath.IsAbs(path) || filepath.Clean(path) != path {
			return fmt.Errorf("HAMi-core %s %q must be an absolute, clean path (it is mounted into containers)", what, path)
		}
	}
	if c.CollectAfter < 0 {
		return fmt.Errorf("HAMi-core collect-after %s is negative", c.CollectAfter)
	}
	if c.CounterSize < 0 || (c.CounterSize > 0 && c.CounterSize < MinCounterSize) {
		return fmt.Errorf("HAMi-core counter size %d bytes: want 0 (unbounded) or at least %d, the size of HAMi-core's counter file",
			c.CounterSize, MinCounterSize)
	}
	if c.InstallFrom != "" && !filepath.IsAbs(c.InstallFrom) {
		return fmt.Errorf("HAMi-core library source %q must be an absolute path", c.InstallFrom)
	}
	if filepath.Dir(c.Library) == ContainerCacheDir || c.Library == ContainerPreloadPath || c.Library == ContainerOverridePath {
		return fmt.Errorf("HAMi-core library %q collides with a path the plugin mounts", c.Library)
	}
	return nil
}
