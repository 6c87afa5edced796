package cache

import "errors"

// Errors returned by the cache; test with errors.Is.
var (
	// ErrUnknownNode: the cache has no such GPU-sharing node.
	ErrUnknownNode = errors.New("unknown node")
	// ErrDoesNotFit: the placement does not fit the node's free memory any more.
	ErrDoesNotFit = errors.New("placement does not fit")
	// ErrPodOnOtherNode: the pod is already assumed or bound on another node.
	ErrPodOnOtherNode = errors.New("pod is already placed on another node")
)
