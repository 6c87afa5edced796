package deviceplugin

import (
	"context"

	v1 "k8s.io/api/core/v1"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// PodSource lists the pods bound to the plugin's node, as the API server (or a test) knows them.
// Implementations must be safe for concurrent use; returned pods are read-only.
type PodSource interface {
	// NodePods returns the pods whose spec.nodeName is the plugin's node.
	NodePods(ctx context.Context) ([]*v1.Pod, error)
}

// PodResourcesSource is the kubelet's own view: the pods it holds (including the one it is
// admitting) and, per container, the device IDs it allocated. The kubelet serves it on
// /var/lib/kubelet/pod-resources/kubelet.sock (NewPodResourcesClient); a devicemanager test can
// build it from the manager's GetDevices. Implementations must be safe for concurrent use.
type PodResourcesSource interface {
	// List returns every pod the kubelet holds with the devices of its containers.
	List(ctx context.Context) ([]*podresourcesv1.PodResources, error)
}

// Runner is implemented by sources that need a background loop (e.g. an informer); Run starts it
// and returns once the source is ready to answer, or ctx is done.
type Runner interface {
	Run(ctx context.Context) error
}
