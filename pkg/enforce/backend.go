package enforce

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Backend holds containers to their ask. Implementations are safe for concurrent use.
type Backend interface {
	// Mode is the effective mode: ModeHAMiCore, ModeNone, or ModeUnavailable (HAMi-core was
	// asked for and could not be prepared; reason says why).
	Mode() (mode, reason string)
	// Prepare makes the host files req's container needs (its counter folder) and returns the
	// mounts and env that hold it to its ask. A failure leaves nothing mounted. A backend that
	// enforces nothing returns empty Edits.
	Prepare(req Request) (Edits, error)
	// ContainerPaths are the paths inside a container that Prepare's mounts land on (none for
	// a backend that enforces nothing). The runtime follows symlinks there, so the plugin
	// checks, before a container starts, that its image has none on the way to them.
	ContainerPaths() []string
	// Collect removes the host files of pods that are not in live and were not written for
	// the configured time, now being the current time.
	Collect(ctx context.Context, live []types.UID, now time.Time)
}

// Request is one container to hold to its ask.
type Request struct {
	// PodUID and Container name the container's host files; each must be a plain name.
	PodUID    types.UID
	Container string
	// Pod is the pod's namespace/name, said in errors.
	Pod string
	// CardBytes is the memory the container may use on each card it sees, in the order of
	// NVIDIA_VISIBLE_DEVICES.
	CardBytes []int64
	// CorePercent caps the container's share of each card's SMs, in percent; 0 sets no cap.
	CorePercent int
}

// Edits is what a container gets: mounts and env to add to its spec.
type Edits struct {
	Mounts []Mount
	Env    map[string]string
}

// Mount is a host path bound into the container.
type Mount struct {
	ContainerPath string
	HostPath      string
	ReadOnly      bool
}
