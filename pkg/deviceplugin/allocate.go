package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/contract"
)

// reasonAllocateFailed is the Warning Event on a pod whose Allocate failed.
const reasonAllocateFailed = "GPUShareAllocateFailed"

// Allocate answers kubelet for each container: it resolves the pod and container being admitted
// (see resolve) and returns the contract's env naming the GPUs the extender chose. It never
// returns a placeholder env: when it cannot resolve, kubelet gets an error saying why.
func (p *Plugin) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	logger := klog.FromContext(p.baseCtx(ctx))
	resp := &pluginapi.AllocateResponse{}
	for _, creq := range req.GetContainerRequests() {
		ids := creq.GetDevicesIds()
		if err := p.checkIDs(ids); err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		ch, err := p.resolve(ctx, int64(len(ids)), ids, true)
		if err != nil {
			logger.Error(err, "Allocate could not resolve the pod", "units", len(ids))
			if ch != nil { // the pod was found but cannot be admitted: tell its owner too
				p.warnPod(ctx, ch.pod, reasonAllocateFailed, err.Error())
			}
			return nil, status.Error(resolveCode(err), err.Error())
		}
		cresp, err := p.containerResponse(ch)
		if err != nil {
			p.tracker.retract(devicesKey(ids), refOf(ch))
			logger.Error(err, "Allocate could not answer for the container", "pod", klog.KObj(ch.pod), "container", ch.container.Name)
			p.warnPod(ctx, ch.pod, reasonAllocateFailed, err.Error())
			return nil, status.Error(codes.FailedPrecondition, err.Error())
		}
		p.checkAlignment(ctx, ch, ids)
		mode, reason := p.backend.Mode()
		if mode == contract.MemoryLimitUnavailable {
			p.warnPod(ctx, ch.pod, ReasonMemoryLimitUnavailable, fmt.Sprintf("container %s runs WITHOUT a GPU memory limit on node %s: %s",
				ch.container.Name, p.cfg.nodeName, reason))
		}
		logger.V(2).Info("Allocated", "pod", klog.KObj(ch.pod), "container", ch.container.Name,
			"gpu", cresp.Envs[contract.EnvIndex], "units", len(ids), "memoryLimit", mode)
		resp.ContainerResponses = append(resp.ContainerResponses, cresp)
	}
	p.reconciler.trigger()
	return resp, nil
}

// resolveCode maps resolve errors onto gRPC codes.
func resolveCode(err error) codes.Code {
	switch {
	case errors.Is(err, ErrNoPod):
		return codes.NotFound
	case errors.Is(err, ErrBrokenPlacement), errors.Is(err, ErrOverCapacity):
		return codes.FailedPrecondition
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return codes.Canceled
	}
	return codes.Unavailable
}

// checkIDs refuses device IDs the plugin never advertised, and an ID named twice (it would
// count as two units of one card).
func (p *Plugin) checkIDs(ids []string) error {
	if len(ids) == 0 {
		return fmt.Errorf("allocate request without devices")
	}
	seen := make(map[string]bool, len(ids))
	for _, id := range ids {
		if _, err := p.inv.gpuOf(id); err != nil {
			return err
		}
		if seen[id] {
			return fmt.Errorf("%w %q: named twice in one request", ErrUnknownDevice, id)
		}
		seen[id] = true
	}
	return nil
}

// containerResponse is Allocate's answer for a chosen container: the contract's env naming its
// cards and, where the node enforces limits, HAMi-core's mounts and per-card limits.
//
// This answer and the background correction must agree. Allocate may guess the wrong
// container (two pods wait for equal containers and the kubelet does not list the one it admits
// yet). The answer is built from ch.placement, and the ledger recorded that very placement in
// the container's handout (tracker.admit). Later, verify.go learns from the kubelet's
// PodResources which container really got the devices, and rebalance_placements.go writes the
// handout's placement onto that container's annotation, trading placements only among
// containers of equal units and kind (init or app), so that every card's total stays. The
// correction thus carries the placement, and with it the container's units, to the real owner,
// and nothing else. So:
//
//   - what the answer derives from the placement and the container's units (the cards, their
//     units, EnvDev, EnvContainer, the per-card memory limits) is right after a correction;
//   - what it derives from the guessed pod is not corrected: EnvPod (the pod's total units),
//     the core limit annotation, the HAMi-core counter folder (named by the pod's UID and the
//     container's name);
//   - a change to what this answer depends on must change the correction to match: carry the
//     new input in the handout and have rebalance trade only among containers equal in it
//     (slotGroup), or rewrite it too; a handout whose placement differs from what the env names
//     makes the correction write a wrong annotation.
func (p *Plugin) containerResponse(ch *choice) (*pluginapi.ContainerAllocateResponse, error) {
	indexes := make([]int, 0, len(ch.placement))
	for g := range ch.placement {
		indexes = append(indexes, g)
	}
	slices.Sort(indexes)
	uuids := make([]string, len(indexes))
	idx := make([]string, len(indexes))
	perCard := make([]int64, len(indexes))
	var firstUnits int64
	for i, g := range indexes {
		card, ok := p.inv.lookup(g)
		if !ok {
			return nil, fmt.Errorf("pod %s: placement names GPU %d, which node %s does not have", klog.KObj(ch.pod), g, p.cfg.nodeName)
		}
		if i == 0 {
			firstUnits = card.units
		}
		uuids[i], idx[i] = card.UUID, strconv.Itoa(g)
		perCard[i] = ch.placement[g]
	}
	env := map[string]string{
		contract.EnvVisibleDevices: strings.Join(uuids, ","),
		contract.EnvIndex:          strings.Join(idx, ","),
		contract.EnvPod:            strconv.FormatInt(ch.req.TotalUnits(), 10),
		contract.EnvContainer:      strconv.FormatInt(ch.container.Units, 10),
		contract.EnvDev:            strconv.FormatInt(firstUnits, 10),
	}
	core, _, err := contract.CoreLimit(ch.pod, &p.cfg.names)
	if err != nil {
		return nil, err
	}
	mounts, limits, err := p.containerLimits(ch.pod, ch.container.Name, perCard, core)
	if err != nil {
		return nil, err
	}
	maps.Copy(env, limits)
	return &pluginapi.ContainerAllocateResponse{Envs: env, Mounts: mounts}, nil
}

// GetPreferredAllocation steers kubelet to units of the GPU(s) the extender chose for the
// container about to be allocated, as many on each card as the placement puts there, so that
// the device IDs tell which card a container uses and the NUMA node kubelet aligns it to is
// its cards'. Under a Topology Manager policy kubelet offers only the devices of the NUMA
// nodes it chose; when those lack the placement's cards, the answer cannot name them (logged;
// Allocate then warns the pod, see checkAlignment).
func (p *Plugin) GetPreferredAllocation(ctx context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	logger := klog.FromContext(p.baseCtx(ctx))
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, creq := range req.GetContainerRequests() {
		size := int64(creq.GetAllocationSize())
		var placement map[int]int64
		if ch, err := p.resolve(ctx, size, nil, false); err == nil {
			placement = ch.placement
		} else {
			logger.V(2).Info("No preference", "reason", err.Error())
		}
		ids := p.prefer(creq.GetAvailableDeviceIDs(), creq.GetMustIncludeDeviceIDs(), placement, int(size))
		if placement != nil && !p.coversPlacement(ids, placement) {
			logger.V(2).Info("Kubelet offers too few units of the placement's cards (Topology Manager alignment?)",
				"placement", placement, "offered", p.cardsOf(creq.GetAvailableDeviceIDs()))
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

// prefer picks size IDs: the must-include ones, then units of each placement GPU, then any.
func (p *Plugin) prefer(available, must []string, placement map[int]int64, size int) []string {
	out := slices.Clone(must)
	taken := map[string]bool{}
	perGPU := map[int]int64{}
	for _, id := range must {
		taken[id] = true
		if g, err := p.inv.gpuOf(id); err == nil {
			perGPU[g]++
		}
	}
	for _, pass := range []bool{true, false} {
		for _, id := range available {
			if len(out) >= size {
				return out
			}
			g, err := p.inv.gpuOf(id)
			if taken[id] || err != nil || (pass && perGPU[g] >= placement[g]) {
				continue
			}
			taken[id] = true
			perGPU[g]++
			out = append(out, id)
		}
	}
	return out
}
