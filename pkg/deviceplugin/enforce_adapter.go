package deviceplugin

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/enforce"
)

// The plugin's side of the enforcement backend (package enforce): it converts Allocate's
// containers into enforce.Requests and enforce.Edits into kubelet's types.

// newBackend prepares the configured enforcement backend (enforce.NewBackend).
func newBackend(ctx context.Context, cfg *config) enforce.Backend {
	var opts []enforce.Option
	if cfg.counterMounter != nil {
		opts = append(opts, enforce.WithMounter(cfg.counterMounter))
	}
	return enforce.NewBackend(ctx, cfg.memoryLimit, opts...)
}

// containerLimits returns the mounts and env that hold a container of pod to its ask on its
// cards (perCard: its units on each card it sees, in the order of NVIDIA_VISIBLE_DEVICES), in
// kubelet's types, and makes its host files (enforce.Backend.Prepare). Without enforcement it
// returns nothing.
func (p *Plugin) containerLimits(pod *v1.Pod, container string, perCard []int64, corePercent int) ([]*pluginapi.Mount, map[string]string, error) {
	cardBytes := make([]int64, len(perCard))
	for i, units := range perCard {
		cardBytes[i] = units * p.cfg.names.UnitBytes()
	}
	edits, err := p.backend.Prepare(enforce.Request{PodUID: pod.UID, Container: container, Pod: klog.KObj(pod).String(),
		CardBytes: cardBytes, CorePercent: corePercent})
	if err != nil {
		return nil, nil, err
	}
	var mounts []*pluginapi.Mount
	for _, m := range edits.Mounts {
		mounts = append(mounts, &pluginapi.Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, ReadOnly: m.ReadOnly})
	}
	return mounts, edits.Env, nil
}

// collectLimits removes the enforcement files of pods gone from the node (not in pods).
func (p *Plugin) collectLimits(ctx context.Context, pods []*v1.Pod, now time.Time) {
	live := make([]types.UID, len(pods))
	for i, pod := range pods {
		live[i] = pod.UID
	}
	p.backend.Collect(ctx, live, now)
}
