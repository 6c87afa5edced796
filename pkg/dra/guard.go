package dra

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/klog/v2"
)

// ErrOtherMode is returned when share-plugin already serves this node in the other mode: a node
// runs one mode, device plugin or DRA, never both (they would hand out the same memory twice).
var ErrOtherMode = errors.New("share-plugin already runs in the other mode on this node")

// guardDialTimeout bounds one probe of a socket.
const guardDialTimeout = time.Second

// The signal of a running mode is its socket answering: the device plugin's in kubelet's
// device-plugins folder, the DRA driver's registration socket in kubelet's plugins_registry
// folder. Each mode serves its socket for as long as it runs and nothing else answers on it.
// A socket file alone is no signal: one left by a killed process refuses connections, and
// kubelet clears the device-plugins folder only when it restarts. While a node moves from one
// mode to the other, the new mode's pod fails until the old one has stopped, and its restarts
// (with the kubelet's back-off) then succeed.

// CheckNoDevicePlugin is DRA mode's start check: ErrOtherMode when the device plugin's socket
// (kubelet's device-plugins folder and --socket-name) answers.
func CheckNoDevicePlugin(ctx context.Context, socket string) error {
	on, err := answers(ctx, socket)
	if err != nil {
		return err
	}
	if on {
		return fmt.Errorf("%w: the device plugin answers on %s; a node runs one mode: label the node gpushare.io/mode=dra so that the device "+
			"plugin's DaemonSet leaves it (and drain its GPU pods first), or run this pod only on nodes without the device plugin", ErrOtherMode, socket)
	}
	return nil
}

// CheckNoDRADriver is device-plugin mode's start check: ErrOtherMode when the registration
// socket of the DRA driver named driverName answers in kubelet's registry folder (its plain name,
// or the name of a rolling update). A registry folder the plugin cannot see (not mounted) is
// logged and not checked.
func CheckNoDRADriver(ctx context.Context, registryDir, driverName string) error {
	logger := klog.FromContext(ctx)
	if _, err := os.Stat(registryDir); err != nil {
		logger.Info("Warning: cannot check that the DRA driver is not running on this node (kubelet's registry folder is not visible)",
			"registryDir", registryDir, "driver", driverName, "err", err)
		return nil
	}
	rolling, err := filepath.Glob(filepath.Join(registryDir, driverName+"-*-reg.sock"))
	if err != nil {
		return fmt.Errorf("list %s: %w", registryDir, err)
	}
	for _, socket := range append([]string{filepath.Join(registryDir, driverName+"-reg.sock")}, rolling...) {
		on, err := answers(ctx, socket)
		if err != nil {
			return err
		}
		if on {
			return fmt.Errorf("%w: the DRA driver %s answers on %s; a node runs one mode: remove the label gpushare.io/mode=dra from the node "+
				"so that the DRA driver's DaemonSet leaves it (and drain its GPU pods first)", ErrOtherMode, driverName, socket)
		}
	}
	return nil
}

// answers reports whether something accepts connections on the unix socket path. A missing
// file, or one nobody listens on (left by a process that died), is false; any other failure
// to connect is an error: the check cannot tell.
func answers(ctx context.Context, path string) (bool, error) {
	dialer := net.Dialer{Timeout: guardDialTimeout}
	conn, err := dialer.DialContext(ctx, "unix", path)
	switch {
	case err == nil:
		_ = conn.Close()
		return true, nil
	case errors.Is(err, os.ErrNotExist):
		return false, nil
	case errors.Is(err, syscall.ECONNREFUSED):
		klog.FromContext(ctx).Info("A stale socket of the other mode: nobody listens on it", "socket", path)
		return false, nil
	}
	return false, fmt.Errorf("cannot tell whether the other mode runs on this node: connect to %s: %w", path, err)
}
