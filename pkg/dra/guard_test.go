package dra

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/klog/v2/ktesting"
)

// socketState is what is at a socket path.
type socketState int

const (
	noSocket    socketState = iota // no file
	staleSocket                    // a socket file nobody listens on (its process died)
	liveSocket                     // a process listens on it
)

// makeSocket puts state at path; a live socket is closed when the test ends.
func makeSocket(t *testing.T, path string, state socketState) {
	t.Helper()
	if state == noSocket {
		return
	}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ul, _ := l.(*net.UnixListener)
	if state == staleSocket {
		ul.SetUnlinkOnClose(false)
		_ = l.Close()
		return
	}
	t.Cleanup(func() { _ = l.Close() })
}

func TestCheckNoDevicePlugin(t *testing.T) {
	tests := []struct {
		name    string
		state   socketState
		wantErr error
	}{
		{name: "no device plugin", state: noSocket},
		{name: "a stale socket of a device plugin gone", state: staleSocket},
		{name: "the device plugin runs", state: liveSocket, wantErr: ErrOtherMode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			socket := filepath.Join(shortDir(t), "gpushare.sock")
			makeSocket(t, socket, tt.state)
			if err := CheckNoDevicePlugin(ctx, socket); !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("CheckNoDevicePlugin = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

func TestCheckNoDRADriver(t *testing.T) {
	tests := []struct {
		name       string
		noRegistry bool
		file       string // the registration socket's name in the registry folder
		state      socketState
		wantErr    error
	}{
		{name: "no DRA driver", file: "gpushare.aliyun.com-reg.sock", state: noSocket},
		{name: "kubelet's registry folder not mounted", noRegistry: true},
		{name: "a stale registration socket", file: "gpushare.aliyun.com-reg.sock", state: staleSocket},
		{name: "the DRA driver runs", file: "gpushare.aliyun.com-reg.sock", state: liveSocket, wantErr: ErrOtherMode},
		{name: "the DRA driver runs with rolling updates", file: "gpushare.aliyun.com-9f2c-reg.sock", state: liveSocket, wantErr: ErrOtherMode},
		{name: "another DRA driver runs", file: "gpu.nvidia.com-reg.sock", state: liveSocket},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			dir := filepath.Join(shortDir(t), "plugins_registry")
			if !tt.noRegistry {
				if err := os.Mkdir(dir, 0o750); err != nil {
					t.Fatal(err)
				}
				makeSocket(t, filepath.Join(dir, tt.file), tt.state)
			}
			if err := CheckNoDRADriver(ctx, dir, DefaultDriverName); !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("CheckNoDRADriver = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// shortDir is a temporary folder with a short path: a unix socket's path is limited to 108
// bytes, which t.TempDir's, named after the test, can exceed.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dra")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}
