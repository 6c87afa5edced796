package deviceplugin

import (
	"debug/elf"
	"fmt"

	"github.com/gpushare/gpushare/pkg/enforce"
)

// Memory limit modes (--memory-limit): how containers are held to the GPU memory they asked
// (see package enforce).
const (
	// MemoryLimitNone shares cards without limits: a container may use a whole card.
	MemoryLimitNone = enforce.ModeNone
	// MemoryLimitHAMiCore preloads HAMi-core into every container Allocate admits, with a limit
	// per card (and an optional compute cap).
	MemoryLimitHAMiCore = enforce.ModeHAMiCore
)

// Defaults of MemoryLimitConfig (enforce.DefaultConfig).
const (
	// DefaultHAMiCoreLibrary is enforce.DefaultHAMiCoreLibrary.
	DefaultHAMiCoreLibrary = enforce.DefaultHAMiCoreLibrary
	// DefaultMemoryLimitState is enforce.DefaultStateDir.
	DefaultMemoryLimitState = enforce.DefaultStateDir
	// DefaultCollectAfter is enforce.DefaultCollectAfter.
	DefaultCollectAfter = enforce.DefaultCollectAfter
	// DefaultCounterSize is enforce.DefaultCounterSize.
	DefaultCounterSize = enforce.DefaultCounterSize
	// MinCounterSize is enforce.MinCounterSize.
	MinCounterSize = enforce.MinCounterSize
)

// What a container admitted under HAMi-core gets (see package enforce).
const (
	// ContainerPreloadPath is enforce.ContainerPreloadPath.
	ContainerPreloadPath = enforce.ContainerPreloadPath
	// ContainerOverridePath is enforce.ContainerOverridePath.
	ContainerOverridePath = enforce.ContainerOverridePath
	// ContainerCacheDir is enforce.ContainerCacheDir.
	ContainerCacheDir = enforce.ContainerCacheDir
	// EnvMemoryLimit is enforce.EnvMemoryLimit.
	EnvMemoryLimit = enforce.EnvMemoryLimit
	// EnvSharedCache is enforce.EnvSharedCache.
	EnvSharedCache = enforce.EnvSharedCache
	// EnvSMLimit is enforce.EnvSMLimit.
	EnvSMLimit = enforce.EnvSMLimit
	// EnvDeviceOrder is enforce.EnvDeviceOrder.
	EnvDeviceOrder = enforce.EnvDeviceOrder
)

// ReasonMemoryLimitUnavailable is the Warning event on a pod admitted without the memory limit
// the node's plugin was asked to enforce.
const ReasonMemoryLimitUnavailable = "GPUMemoryLimitUnavailable"

// MemoryLimitConfig says how the plugin holds containers to their ask (WithMemoryLimit).
type MemoryLimitConfig = enforce.Config

// DefaultMemoryLimitConfig is no limits, with HAMi-core's default paths.
func DefaultMemoryLimitConfig() MemoryLimitConfig { return enforce.DefaultConfig() }

// WithMemoryLimit sets how containers are held to the memory they asked. Default
// DefaultMemoryLimitConfig (none).
func WithMemoryLimit(c MemoryLimitConfig) Option { return func(cfg *config) { cfg.memoryLimit = c } }

// ValidateMemoryLimit reports what is wrong with c (New checks it too), wrapping
// ErrInvalidConfig.
func ValidateMemoryLimit(c MemoryLimitConfig) error {
	if err := c.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// HostELFMachine is the ELF machine of the node's architecture (enforce.HostELFMachine).
func HostELFMachine() (elf.Machine, bool) { return enforce.HostELFMachine() }
