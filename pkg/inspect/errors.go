package inspect

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Errors returned by the command; test with errors.Is.
var (
	// ErrUnknownNode: a node named on the command line does not exist.
	ErrUnknownNode = errors.New("unknown node")
	// ErrNotSharing: a node named on the command line exists but shares no GPUs.
	ErrNotSharing = errors.New("node shares no GPUs")
	// ErrForbidden: the API server refused a read the command needs.
	ErrForbidden = errors.New("no access")
	// ErrInvalidOptions: the command line is not usable.
	ErrInvalidOptions = errors.New("invalid options")
)

// explainAPIError turns a Forbidden into a message naming the missing permission; other errors
// are wrapped with what was being done.
func explainAPIError(err error, verb, resource, scope string) error {
	if apierrors.IsForbidden(err) {
		return fmt.Errorf("%w: the current user may not %s %s %s; kubectl inspect gpushare needs get/list on nodes and list on pods in all namespaces (a ClusterRole bound with a ClusterRoleBinding): %w",
			ErrForbidden, verb, resource, scope, err)
	}
	return fmt.Errorf("%s %s %s: %w", verb, resource, scope, err)
}
