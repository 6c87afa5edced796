package enforce

import (
	"context"

	"k8s.io/klog/v2"
)

// Option changes how NewBackend builds a backend.
type Option func(*options)

type options struct {
	mounter Mounter
}

// WithMounter replaces the tmpfs mounts of the HAMi-core counter folders (tests that cannot
// mount). Default: real tmpfs mounts.
func WithMounter(m Mounter) Option { return func(o *options) { o.mounter = m } }

// NewBackend prepares the configured mode, which Validate accepted. With HAMi-core it installs
// and checks the library, writes the preload and override files and makes the counter folder.
// A failure does not stop the caller: it returns a backend of mode ModeUnavailable that
// enforces nothing, says so in the log, and whose Mode says why.
func NewBackend(ctx context.Context, cfg Config, opts ...Option) Backend {
	o := options{mounter: tmpfsMounter{}}
	for _, opt := range opts {
		opt(&o)
	}
	logger := klog.FromContext(ctx)
	if cfg.Mode != ModeHAMiCore {
		logger.Info("GPU memory limits are off: containers may use whole cards", "memoryLimit", cfg.Mode)
		return none{mode: cfg.Mode}
	}
	h := &hamiCore{cfg: cfg, mounter: o.mounter}
	if err := h.prepare(); err != nil {
		logger.Error(err, "GPU MEMORY LIMITS UNAVAILABLE: containers on this node are NOT held to the memory they ask",
			"memoryLimit", cfg.Mode, "library", cfg.Library)
		return none{mode: ModeUnavailable, reason: err.Error()}
	}
	logger.Info("GPU memory limits on: every container is held to its ask by HAMi-core",
		"library", cfg.Library, "stateDir", cfg.StateDir, "counterSizeBytes", cfg.CounterSize)
	return h
}
