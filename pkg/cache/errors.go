package cache

import (
	"errors"

	"github.com/gpushare/gpushare/pkg/placement"
)

// Errors returned by the cache; test with errors.Is.
var (
	// ErrUnknownNode: the cache has no such GPU-sharing node (placement's sentinel, so that
	// placement code can test for it too).
	ErrUnknownNode = placement.ErrUnknownNode
	// ErrDoesNotFit: the placement does not fit the node's free memory any more (placement's
	// sentinel: NodeInfo.CheckFit returns it).
	ErrDoesNotFit = placement.ErrDoesNotFit
	// ErrPodOnOtherNode: the pod is already assumed or bound on another node.
	ErrPodOnOtherNode = errors.New("pod is already placed on another node")
)
