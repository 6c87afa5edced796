package deviceplugin

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/imagecheck"
)

// ImageChecker tells whether a container image has a symlink on the way to any of paths
// (imagecheck.Containerd): it returns an error wrapping imagecheck.ErrRedirected when it has,
// and another error when it cannot tell. Implementations must be safe for concurrent use.
type ImageChecker interface {
	Check(ctx context.Context, image string, paths []string) error
}

// ReasonImageRefused is the Warning Event on a pod one of whose containers the plugin would not
// let start: its image redirects a path the limit's files are mounted at.
const ReasonImageRefused = "GPUShareImageRefused"

// pluginOptions are the options the plugin registers with: PreStartContainer is asked for when
// images are checked.
func (p *Plugin) pluginOptions() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true, PreStartRequired: p.preStartChecks()}
}

// preStartChecks reports whether containers' images are checked before they start: an image
// checker is set and the enforcement backend mounts something.
func (p *Plugin) preStartChecks() bool {
	return p.cfg.images != nil && len(p.backend.ContainerPaths()) > 0
}

// PreStartContainer runs before the kubelet creates each container that got gpu-mem units, at
// every start, after the image is pulled: it refuses a container whose image has a symlink on
// the way to a path the enforcement backend mounts (the runtime would follow it and put the
// limit's files elsewhere; see package imagecheck). It fails closed: a container whose owner or
// image cannot be checked does not start, and the kubelet retries with back-off.
func (p *Plugin) PreStartContainer(ctx context.Context, req *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	if !p.preStartChecks() {
		return &pluginapi.PreStartContainerResponse{}, nil
	}
	logger := klog.FromContext(p.baseCtx(ctx))
	pod, c, err := p.containerOf(ctx, req.GetDevicesIds())
	if err != nil {
		logger.Error(err, "PreStartContainer: cannot tell whose devices these are", "devices", len(req.GetDevicesIds()))
		return nil, status.Error(codes.FailedPrecondition, "gpushare cannot check the container's image: "+err.Error())
	}
	switch err := p.cfg.images.Check(ctx, c.Image, p.backend.ContainerPaths()); {
	case err == nil:
		logger.V(4).Info("Image checked", "pod", klog.KObj(pod), "container", c.Name, "image", c.Image)
		return &pluginapi.PreStartContainerResponse{}, nil
	case errors.Is(err, imagecheck.ErrRedirected):
		msg := fmt.Sprintf("container %s not started: %v; the runtime would follow it and the GPU memory limit's files would not be where the container reads them", c.Name, err)
		logger.Info("Refused a container whose image redirects the limit's files", "pod", klog.KObj(pod), "container", c.Name, "err", err)
		p.warnPod(ctx, pod, ReasonImageRefused, msg)
		return nil, status.Error(codes.PermissionDenied, msg)
	default:
		logger.Error(err, "PreStartContainer: cannot check the image", "pod", klog.KObj(pod), "container", c.Name, "image", c.Image)
		return nil, status.Error(codes.Unavailable, fmt.Sprintf("gpushare cannot check the image of container %s: %v", c.Name, err))
	}
}

// containerOf finds the container that holds exactly devices: by the kubelet's PodResources,
// else by the admission ledger (init containers, which PodResources may not list).
func (p *Plugin) containerOf(ctx context.Context, ids []string) (*v1.Pod, *v1.Container, error) {
	if len(ids) == 0 {
		return nil, nil, errors.New("no devices named")
	}
	key := devicesKey(ids)
	ref, found := p.kubeletOwner(ctx, key)
	if !found {
		ref, found = p.tracker.ownerOf(key)
	}
	if !found {
		return nil, nil, fmt.Errorf("no container of node %s holds devices %s", p.cfg.nodeName, key)
	}
	pods, err := p.cfg.pods.NodePods(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("list the node's pods: %w", err)
	}
	for _, pod := range pods {
		if (types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}) != ref.pod {
			continue
		}
		for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for i := range list {
				if list[i].Name == ref.container {
					return pod, &list[i], nil
				}
			}
		}
	}
	return nil, nil, fmt.Errorf("pod %s with container %s is not among node %s's pods", ref.pod, ref.container, p.cfg.nodeName)
}

// kubeletOwner is the one container the kubelet's PodResources shows holding devices (the
// sorted, joined IDs).
func (p *Plugin) kubeletOwner(ctx context.Context, devices string) (ownerRef, bool) {
	if p.cfg.podResources == nil {
		return ownerRef{}, false
	}
	list, err := p.cfg.podResources.List(ctx)
	if err != nil {
		klog.FromContext(p.baseCtx(ctx)).V(2).Info("PodResources unavailable; using the admission ledger", "err", err)
		return ownerRef{}, false
	}
	owners := newKubeletView(list, p.cfg.names.Resource).owners()[devices]
	if len(owners) != 1 {
		return ownerRef{}, false
	}
	return owners[0], true
}
