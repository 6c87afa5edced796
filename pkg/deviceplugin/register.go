package deviceplugin

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// registerTimeout bounds one registration call to kubelet.
const registerTimeout = 10 * time.Second

// kubeletSocket is kubelet's registration socket in the kubelet dir.
func (p *Plugin) kubeletSocket() string { return filepath.Join(p.cfg.kubeletDir, "kubelet.sock") }

// register tells kubelet about the plugin's socket and resource.
func (p *Plugin) register(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+p.kubeletSocket(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial kubelet %s: %w", p.kubeletSocket(), err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(ctx, registerTimeout)
	defer cancel()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     p.cfg.socketName,
		ResourceName: string(p.cfg.names.Resource),
		Options:      p.pluginOptions(),
	})
	if err != nil {
		return fmt.Errorf("register %s with kubelet at %s: %w", p.cfg.names.Resource, p.kubeletSocket(), err)
	}
	return nil
}

// kubeletDirPoll is how often the plugin looks for a kubelet directory that does not exist yet.
const kubeletDirPoll = time.Second

// waitForKubeletDir returns once the kubelet's device-plugin directory exists (kubelet may
// start after the plugin), or ctx's error when ctx ends first.
func (p *Plugin) waitForKubeletDir(ctx context.Context) error {
	logged := false
	for {
		if _, err := os.Stat(p.cfg.kubeletDir); err == nil {
			return nil
		} else if !logged {
			klog.FromContext(ctx).Info("Waiting for kubelet's device-plugin directory", "dir", p.cfg.kubeletDir, "err", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(kubeletDirPoll):
		}
	}
}

// watchKubeletDir reports on restart when kubelet.sock is created again: kubelet restarted,
// wiped the plugin sockets and forgot its registrations.
func (p *Plugin) watchKubeletDir(ctx context.Context, restart chan<- string) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", p.cfg.kubeletDir, err)
	}
	if err := w.Add(p.cfg.kubeletDir); err != nil {
		_ = w.Close()
		return fmt.Errorf("watch %s: %w", p.cfg.kubeletDir, err)
	}
	go func() {
		defer func() { _ = w.Close() }()
		for {
			select {
			case <-ctx.Done():
				return
			case ev := <-w.Events:
				if why := restartReason(ev, p.kubeletSocket()); why != "" {
					select {
					case restart <- why:
					default: // a restart is already pending
					}
				}
			case err := <-w.Errors:
				select {
				case restart <- "watch error: " + err.Error():
				default:
				}
			}
		}
	}()
	return nil
}

// restartReason says why an event needs the plugin to serve and register again, or "".
func restartReason(ev fsnotify.Event, kubeletSock string) string {
	if ev.Name == kubeletSock && ev.Has(fsnotify.Create) {
		return "kubelet.sock created (kubelet restarted)"
	}
	return ""
}
