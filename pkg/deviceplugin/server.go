package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// GetDevicePluginOptions tells kubelet the plugin implements GetPreferredAllocation.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

// ListAndWatch sends the fake devices, then again on every health change, until kubelet or the
// plugin (its gRPC server) stops.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, stream grpc.ServerStreamingServer[pluginapi.ListAndWatchResponse]) error {
	logger := klog.FromContext(p.baseCtx(stream.Context()))
	for {
		devs, changed := p.inv.devices()
		if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
			return fmt.Errorf("send devices: %w", err)
		}
		logger.V(4).Info("Sent devices to kubelet", "devices", len(devs))
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		}
	}
}

// PreStartContainer is not used (GetDevicePluginOptions does not ask for it).
func (p *Plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// SocketPath is the plugin's unix socket in the kubelet dir.
func (p *Plugin) SocketPath() string { return filepath.Join(p.cfg.kubeletDir, p.cfg.socketName) }

// serve starts the gRPC server on the plugin socket; stop it with GracefulStop/Stop.
func (p *Plugin) serve(ctx context.Context) (*grpc.Server, error) {
	sock := p.SocketPath()
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", sock, err)
	}
	lis, err := net.Listen("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", sock, err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	go func() {
		if err := srv.Serve(lis); err != nil {
			klog.FromContext(ctx).Error(err, "Device plugin gRPC server stopped", "socket", sock)
		}
	}()
	return srv, nil
}
