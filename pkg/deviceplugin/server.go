package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// GetDevicePluginOptions tells kubelet the plugin implements GetPreferredAllocation, and asks
// for PreStartContainer where images are checked.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return p.pluginOptions(), nil
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

// SocketPath is the plugin's unix socket in the kubelet dir.
func (p *Plugin) SocketPath() string { return filepath.Join(p.cfg.kubeletDir, p.cfg.socketName) }

// listenPrivate listens on the unix socket sock, readable and writable by its owner alone
// (0600) whatever the umask: it binds a temporary name, sets the mode, then renames it into
// place, so the socket is never reachable at sock with looser permissions.
func listenPrivate(sock string) (net.Listener, error) {
	tmp := fmt.Sprintf("%s.%d.tmp", sock, os.Getpid())
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", tmp, err)
	}
	lis, err := net.Listen("unix", tmp)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", tmp, err)
	}
	if ul, ok := lis.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(false) // the name it was bound to is gone after the rename; Close removes sock
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		_ = lis.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("chmod socket %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, sock); err != nil {
		_ = lis.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("move socket %s to %s: %w", tmp, sock, err)
	}
	return &unlinkOnClose{Listener: lis, path: sock}, nil
}

// unlinkOnClose removes the socket's final path when the listener closes, as a unix listener
// does for the path it was bound to.
type unlinkOnClose struct {
	net.Listener
	path string
	once sync.Once
}

func (l *unlinkOnClose) Close() error {
	err := l.Listener.Close()
	l.once.Do(func() { _ = os.Remove(l.path) })
	return err
}

// serve starts the gRPC server on the plugin socket; stop it with GracefulStop/Stop.
func (p *Plugin) serve(ctx context.Context) (*grpc.Server, error) {
	sock := p.SocketPath()
	if err := os.Remove(sock); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", sock, err)
	}
	lis, err := listenPrivate(sock)
	if err != nil {
		return nil, err
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
