package imagecheck

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	contentapi "github.com/containerd/containerd/api/services/content/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	snapshotsapi "github.com/containerd/containerd/api/services/snapshots/v1"
	"github.com/containerd/containerd/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

// Defaults of a Containerd checker: the CRI plugin's namespace and snapshotter.
const (
	DefaultContainerdSocket = "/run/containerd/containerd.sock"
	DefaultNamespace        = "k8s.io"
	DefaultSnapshotter      = "overlayfs"
)

// namespaceHeader is the gRPC metadata key naming containerd's namespace.
const namespaceHeader = "containerd-namespace"

// checkTimeout bounds one check; the kubelet gives PreStartContainer 30 s.
const checkTimeout = 10 * time.Second

// Containerd checks images through containerd's API: the image store names the image's
// manifest, the content store holds its config, and a read-only view of the snapshotter's
// unpacked layers shows the root filesystem a container of it starts from.
type Containerd struct {
	conn   *grpc.ClientConn
	cfg    Config
	opaque func(dir string) bool
}

// Config says where containerd is and how the kubelet's images are kept there.
type Config struct {
	// Socket is containerd's unix socket, as the host names it (DefaultContainerdSocket).
	Socket string
	// Namespace holds the kubelet's images (DefaultNamespace).
	Namespace string
	// Snapshotter unpacks them: overlayfs or native (DefaultSnapshotter).
	Snapshotter string
	// HostRoot is where the host's root filesystem is seen ("/" when the checker runs on the
	// host; /proc/1/root in a container that shares the host's PID namespace): the socket and
	// the snapshotter's folders are reached under it.
	HostRoot string
}

// NewContainerd prepares a checker of the containerd cfg names; it connects lazily, so a
// missing socket shows up as Check errors.
func NewContainerd(cfg Config) (*Containerd, error) {
	if cfg.Socket == "" || cfg.Namespace == "" || cfg.Snapshotter == "" || !filepath.IsAbs(cfg.Socket) || !filepath.IsAbs(cfg.HostRoot) {
		return nil, errors.New("containerd image check: socket (absolute), namespace, snapshotter and host root (absolute) must be set")
	}
	sock := filepath.Join(cfg.HostRoot, cfg.Socket)
	conn, err := grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("containerd client %s: %w", sock, err)
	}
	return &Containerd{conn: conn, cfg: cfg, opaque: isOpaque}, nil
}

// Close closes the connection.
func (c *Containerd) Close() error { return c.conn.Close() }

// Check returns ErrRedirected (wrapped, naming the path) when image has a symlink on any
// component of paths (absolute, clean), and another error when it cannot tell: the image is not
// in the store, the runtime does not answer, or its snapshot cannot be read.
func (c *Containerd) Check(ctx context.Context, image string, paths []string) error {
	ctx, cancel := context.WithTimeout(metadata.AppendToOutgoingContext(ctx, namespaceHeader, c.cfg.Namespace), checkTimeout)
	defer cancel()
	ref, err := normalizeRef(image)
	if err != nil {
		return err
	}
	img, err := imagesapi.NewImagesClient(c.conn).Get(ctx, &imagesapi.GetImageRequest{Name: ref})
	if err != nil {
		return fmt.Errorf("image %s in containerd namespace %s: %w", ref, c.cfg.Namespace, err)
	}
	target := img.GetImage().GetTarget()
	chain, err := chainID(ctx, c.readBlob, target.GetMediaType(), target.GetDigest())
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	layers, release, err := c.view(ctx, chain)
	if err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	defer release()
	if err := (layerView{layers: layers, opaque: c.opaque}).checkPaths(paths); err != nil {
		return fmt.Errorf("image %s: %w", ref, err)
	}
	return nil
}

// readBlob reads a blob of the content store, at most maxBlob bytes.
func (c *Containerd) readBlob(ctx context.Context, digest string) ([]byte, error) {
	stream, err := contentapi.NewContentClient(c.conn).Read(ctx, &contentapi.ReadContentRequest{Digest: digest})
	if err != nil {
		return nil, fmt.Errorf("read content: %w", err)
	}
	var buf bytes.Buffer
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return buf.Bytes(), nil
		}
		if err != nil {
			return nil, fmt.Errorf("read content: %w", err)
		}
		if buf.Len()+len(msg.GetData()) > maxBlob {
			return nil, fmt.Errorf("blob larger than %d bytes", maxBlob)
		}
		buf.Write(msg.GetData())
	}
}

// view makes a read-only view of the snapshot chain and returns its layer folders, top first,
// and a func that removes the view.
func (c *Containerd) view(ctx context.Context, chain string) ([]string, func(), error) {
	suffix := make([]byte, 8)
	_, _ = rand.Read(suffix)
	key := "gpushare-imagecheck-" + hex.EncodeToString(suffix)
	client := snapshotsapi.NewSnapshotsClient(c.conn)
	resp, err := client.View(ctx, &snapshotsapi.ViewSnapshotRequest{Snapshotter: c.cfg.Snapshotter, Key: key, Parent: chain})
	if err != nil {
		return nil, nil, fmt.Errorf("view of snapshot %s (%s): %w", chain, c.cfg.Snapshotter, err)
	}
	release := func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkTimeout)
		defer cancel()
		_, _ = client.Remove(ctx, &snapshotsapi.RemoveSnapshotRequest{Snapshotter: c.cfg.Snapshotter, Key: key})
	}
	layers, err := layerFolders(resp.GetMounts())
	for i := range layers {
		layers[i] = filepath.Join(c.cfg.HostRoot, layers[i])
	}
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("view of snapshot %s: %w", chain, err)
	}
	return layers, release, nil
}

// layerFolders reads the folders of a read-only view's mounts: one bind (a single layer) or
// an overlay's lowerdir list, top first.
func layerFolders(mounts []*types.Mount) ([]string, error) {
	if len(mounts) != 1 {
		return nil, fmt.Errorf("%d mounts, want 1", len(mounts))
	}
	m := mounts[0]
	switch m.GetType() {
	case "bind", "rbind":
		return []string{m.GetSource()}, nil
	case "overlay":
		for _, o := range m.GetOptions() {
			if lower, ok := strings.CutPrefix(o, "lowerdir="); ok {
				return strings.Split(lower, ":"), nil
			}
		}
		return nil, errors.New("overlay mount without lowerdir")
	}
	return nil, fmt.Errorf("mount type %q: only overlay and bind snapshots can be read", m.GetType())
}
