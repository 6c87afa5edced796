package deviceplugin

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// DefaultPodResourcesSocket is where the kubelet serves its PodResources API.
const DefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// podResourcesTimeout bounds one List call; Allocate must not hang on the kubelet.
const podResourcesTimeout = time.Second

// PodResourcesClient is a PodResourcesSource that asks the kubelet over its unix socket.
type PodResourcesClient struct {
	conn   *grpc.ClientConn
	client podresourcesv1.PodResourcesListerClient
}

var _ PodResourcesSource = (*PodResourcesClient)(nil)

// NewPodResourcesClient prepares a client of the kubelet's PodResources socket; it connects
// lazily, so a missing socket shows up as List errors, not here.
func NewPodResourcesClient(socket string) (*PodResourcesClient, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("pod resources client %s: %w", socket, err)
	}
	return &PodResourcesClient{conn: conn, client: podresourcesv1.NewPodResourcesListerClient(conn)}, nil
}

// List asks the kubelet for its pods and their devices.
func (c *PodResourcesClient) List(ctx context.Context) ([]*podresourcesv1.PodResources, error) {
	ctx, cancel := context.WithTimeout(ctx, podResourcesTimeout)
	defer cancel()
	resp, err := c.client.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		return nil, fmt.Errorf("kubelet pod resources list: %w", err)
	}
	return resp.GetPodResources(), nil
}

// Close closes the connection.
func (c *PodResourcesClient) Close() error { return c.conn.Close() }
