package enforce

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// none enforces nothing: mode ModeNone, or ModeUnavailable when HAMi-core could not be
// prepared.
type none struct {
	mode, reason string
}

var _ Backend = none{}

// Mode is ModeNone or ModeUnavailable, with why.
func (n none) Mode() (mode, reason string) { return n.mode, n.reason }

// Prepare hands out nothing: the container may use its whole cards.
func (none) Prepare(Request) (Edits, error) { return Edits{}, nil }

// ContainerPaths is none: nothing is mounted.
func (none) ContainerPaths() []string { return nil }

// Collect has nothing to remove.
func (none) Collect(context.Context, []types.UID, time.Time) {}
