package placement

import "errors"

// ErrDoesNotFit is wrapped by the errors that say a placement does not fit a node's free
// memory; test with errors.Is.
var ErrDoesNotFit = errors.New("placement does not fit")

// ErrUnknownNode is wrapped by the errors that name a node nobody knows of.
var ErrUnknownNode = errors.New("unknown node")
