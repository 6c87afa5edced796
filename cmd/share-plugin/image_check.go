package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/imagecheck"
)

// --image-check values.
const (
	// imageCheckAuto checks images through containerd when limits are enforced and
	// --containerd-socket exists when the plugin starts; otherwise it checks nothing, and says so.
	imageCheckAuto = "auto"
	// imageCheckContainerd checks images through containerd when limits are enforced, and fails
	// closed: a container whose image cannot be checked does not start.
	imageCheckContainerd = "containerd"
	// imageCheckNone checks nothing: a symlink in an image is then caught after the container
	// starts, by the policing from the host (the preload view check).
	imageCheckNone = "none"
)

func (o *options) addImageCheckFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.imageCheck, "image-check", o.imageCheck, "with --memory-limit=hami-core, check before each container starts that its image has no symlink on the way to the paths HAMi-core's files are mounted at (the runtime would follow it): containerd (through --containerd-socket; a container whose image cannot be checked does not start), auto (containerd when the socket exists at start, else none) or none")
	fs.StringVar(&o.containerdSocket, "containerd-socket", o.containerdSocket, "containerd's socket, for --image-check")
	fs.StringVar(&o.containerdNamespace, "containerd-namespace", o.containerdNamespace, "containerd namespace of the kubelet's images (the CRI plugin's), for --image-check")
	fs.StringVar(&o.hostRoot, "host-root", o.hostRoot, "where the host's root filesystem is seen: containerd's socket and snapshot folders are reached under it (/proc/1/root in a container with hostPID)")
	fs.StringVar(&o.containerdSnapshotter, "containerd-snapshotter", o.containerdSnapshotter, "containerd snapshotter that unpacks the kubelet's images (overlayfs or native), for --image-check")
}

func (o *options) validateImageCheck() error {
	switch o.imageCheck {
	case imageCheckAuto, imageCheckContainerd, imageCheckNone:
	default:
		return fmt.Errorf("--image-check must be %s, %s or %s, not %q", imageCheckAuto, imageCheckContainerd, imageCheckNone, o.imageCheck)
	}
	if o.imageCheck != imageCheckNone && (!filepath.IsAbs(o.containerdSocket) || o.containerdNamespace == "" || o.containerdSnapshotter == "" || !filepath.IsAbs(o.hostRoot)) {
		return errors.New("--containerd-socket and --host-root must be absolute, --containerd-namespace and --containerd-snapshotter not empty, with --image-check")
	}
	return nil
}

// imageChecker is the checker --image-check asks for, or nil; close it when done.
func (o *options) imageChecker(ctx context.Context) (*imagecheck.Containerd, error) {
	logger := klog.FromContext(ctx)
	if o.memoryLimit.Mode != contract.MemoryLimitHAMiCore || o.imageCheck == imageCheckNone {
		return nil, nil
	}
	if o.imageCheck == imageCheckAuto {
		if _, err := os.Stat(filepath.Join(o.hostRoot, o.containerdSocket)); err != nil {
			logger.Info("WARNING: images are not checked before containers start (--image-check=auto and no containerd socket): an image with a symlink on the way to HAMi-core's files is caught only once it runs",
				"socket", o.containerdSocket, "err", err)
			return nil, nil
		}
	}
	c, err := imagecheck.NewContainerd(imagecheck.Config{Socket: o.containerdSocket, Namespace: o.containerdNamespace,
		Snapshotter: o.containerdSnapshotter, HostRoot: o.hostRoot})
	if err != nil {
		return nil, fmt.Errorf("--image-check: %w", err)
	}
	logger.Info("Checking images before containers start", "socket", o.containerdSocket, "hostRoot", o.hostRoot, "namespace", o.containerdNamespace, "snapshotter", o.containerdSnapshotter)
	return c, nil
}

var _ deviceplugin.ImageChecker = (*imagecheck.Containerd)(nil)
