package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/ptr"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/usage"
	"github.com/gpushare/gpushare/pkg/dra"
	"github.com/gpushare/gpushare/pkg/enforce"
)

// DRA mode on the GPU: share-plugin --mode=dra's driver, on the real NVML, prepares one claim
// per pod on card checkCard, as kubelet's NodePrepareResources would once kube-scheduler's
// allocator had allocated them, and each container starts with what its claim's CDI device
// gives it (the env and mounts a CDI-enabled runtime applies). The checks are device-plugin
// mode's: the card and limit handed out, both held to their limits side by side, the usage
// metrics, now read from the claims.

// viaPrepare names DRA mode's hand-out in the report (device-plugin mode's is Allocate).
const viaPrepare = "NodePrepareResources (CDI)"

// draPodName is the DRA pod of an ask: "dra-" before the device-plugin pod's name.
func draPodName(a podAsk) string { return "dra-" + a.Pod }

// draObjects are the check's DRA pods, running on the node with their container's runtime ID
// in their status, and their claims: each allocated units of card checkCard's device by the
// driver and reserved for its pod, as kube-scheduler leaves them.
func draObjects(asks []podAsk, unitBytes int64) ([]*v1.Pod, []*resourceapi.ResourceClaim) {
	var pods []*v1.Pod
	var claims []*resourceapi.ResourceClaim
	for _, a := range asks {
		name := draPodName(a)
		claim := name + "-gpu"
		pod := &v1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: checkNamespace, UID: types.UID("gpucheck-" + name)},
			Spec: v1.PodSpec{NodeName: checkNode, ResourceClaims: []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To(claim)}},
				Containers: []v1.Container{{Name: a.Container, Image: "gpucheck", Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{Name: a.Container, ContainerID: "containerd://" + name}}},
		}
		pods = append(pods, pod)
		claims = append(claims, &resourceapi.ResourceClaim{
			ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: checkNamespace, UID: types.UID("gpucheck-claim-" + name)},
			Status: resourceapi.ResourceClaimStatus{
				Allocation: &resourceapi.AllocationResult{Devices: resourceapi.DeviceAllocationResult{Results: []resourceapi.DeviceRequestAllocationResult{{
					Request: "gpu", Driver: dra.DefaultDriverName, Pool: checkNode, Device: fmt.Sprintf("gpu-%d", checkCard),
					ShareID:          ptr.To(types.UID("share-" + name)),
					ConsumedCapacity: map[resourceapi.QualifiedName]resource.Quantity{dra.CapacityMemory: *resource.NewQuantity(a.Units*unitBytes, resource.BinarySI)},
				}}}},
				ReservedFor: []resourceapi.ResourceClaimConsumerReference{{Resource: "pods", Name: name, UID: pod.UID}},
			},
		})
	}
	return pods, claims
}

// draDriverConfig is the driver of the check: HAMi-core with library, its files under dir, no
// health watch, the card's PCIe placement read from sysfs.
func draDriverConfig(dir, library string) dra.Config {
	cfg := dra.DefaultConfig()
	cfg.NodeName, cfg.HealthCheck = checkNode, false
	cfg.CDIRoot, cfg.PluginsDir, cfg.RegistryDir = filepath.Join(dir, "cdi"), filepath.Join(dir, "plugins"), filepath.Join(dir, "registry")
	cfg.Enforce = enforce.Config{Mode: enforce.ModeHAMiCore, Library: library, StateDir: filepath.Join(dir, "state")}
	return cfg
}

// prepareDRA builds the driver over nv and prepares the pods' claims; it returns each
// container as its claim's CDI device starts it. A failure is an error for the report.
func prepareDRA(ctx context.Context, nv nvml.Interface, cfg dra.Config, asks []podAsk) (*dra.Driver, []admitted, []*v1.Pod, error) {
	d, err := dra.New(ctx, nv, k8sfake.NewClientset(), cfg)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("DRA driver: %w", err)
	}
	if mode, reason := d.MemoryLimit(); mode != enforce.ModeHAMiCore {
		return nil, nil, nil, fmt.Errorf("DRA driver memory limit %s, want %s: %s", mode, enforce.ModeHAMiCore, reason)
	}
	pods, claims := draObjects(asks, cfg.Names.UnitBytes())
	res, err := d.PrepareResourceClaims(ctx, claims)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("NodePrepareResources: %w", err)
	}
	adm := make([]admitted, len(claims))
	for i, claim := range claims {
		r := res[claim.UID]
		if r.Err != nil {
			return nil, nil, nil, fmt.Errorf("NodePrepareResources of claim %s: %w", claim.Name, r.Err)
		}
		var ids []string
		for _, dev := range r.Devices {
			ids = append(ids, dev.CDIDeviceIDs...)
		}
		resp, err := cdiResponse(cfg.CDIRoot, ids)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("claim %s: %w", claim.Name, err)
		}
		adm[i] = admitted{Pod: pods[i], Container: asks[i].Container, ContainerID: draPodName(asks[i]), LimitBytes: asks[i].Units * cfg.Names.UnitBytes(),
			Response: resp, Via: viaPrepare}
	}
	return d, adm, pods, nil
}

// cdiResponse resolves CDI device IDs ("vendor/class=name") in the specs of dir into the env
// and mounts a runtime gives the container (each spec's own edits, then the device's), in
// Allocate's shape so that device-plugin mode's checks and launcher take them.
func cdiResponse(dir string, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("no CDI device handed out")
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, fmt.Errorf("CDI specs: %w", err)
	}
	resp := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{}}
	for _, id := range ids {
		kind, name, ok := strings.Cut(id, "=")
		if !ok {
			return nil, fmt.Errorf("CDI device %q is not kind=name", id)
		}
		found := false
		for _, f := range files {
			var spec cdispec.Spec
			raw, err := os.ReadFile(f) //nolint:gosec // G304: the driver's own spec folder
			if err != nil {
				return nil, fmt.Errorf("CDI spec: %w", err)
			}
			if err := json.Unmarshal(raw, &spec); err != nil {
				return nil, fmt.Errorf("CDI spec %s: %w", f, err)
			}
			i := slices.IndexFunc(spec.Devices, func(d cdispec.Device) bool { return d.Name == name })
			if spec.Kind != kind || i < 0 {
				continue
			}
			found = true
			applyEdits(resp, &spec.ContainerEdits)
			applyEdits(resp, &spec.Devices[i].ContainerEdits)
		}
		if !found {
			return nil, fmt.Errorf("CDI device %s: in no spec of %s", id, dir)
		}
	}
	return resp, nil
}

// applyEdits adds CDI edits to resp: "NAME=value" env (a later value wins, as in the runtime's
// spec) and bind mounts, read-only where their options say "ro".
func applyEdits(resp *pluginapi.ContainerAllocateResponse, e *cdispec.ContainerEdits) {
	for _, kv := range e.Env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			resp.Envs[k] = v
		}
	}
	for _, m := range e.Mounts {
		resp.Mounts = append(resp.Mounts, &pluginapi.Mount{ContainerPath: m.ContainerPath, HostPath: m.HostPath, ReadOnly: slices.Contains(m.Options, "ro")})
	}
}

// podList is a usage.PodLister of fixed pods.
type podList []*v1.Pod

// NodePods returns the pods.
func (l podList) NodePods(context.Context) ([]*v1.Pod, error) { return l, nil }

// runDRAPods prepares the pods' claims through the DRA driver and runs their containers side by
// side, as runPods does through the device plugin; the usage sampler reads their limits from
// the claims (usage.ShareSource).
func (r *checkRun) runDRAPods(ctx context.Context) {
	cfg := draDriverConfig(filepath.Join(r.dir, "dra"), r.opts.library)
	d, adm, pods, err := prepareDRA(ctx, r.nv, cfg, r.opts.asks())
	r.res.add("DRA mode: share-plugin --mode=dra on the real NVML prepares both claims", "with HAMi-core limits", orWhy(err == nil, "prepared", fmt.Sprint(err)), err == nil)
	if err != nil {
		return
	}
	for _, a := range adm {
		r.checkAllocate(a)
	}
	owners := newPIDOwners("/proc")
	mode, _ := d.MemoryLimit()
	sampler, err := usage.New(usage.Config{NVML: r.nv, Pods: podList(pods), Owners: owners, Names: contract.DefaultNames(),
		MemoryLimit: mode, MemoryLimitConfigured: mode, Shares: d})
	if err != nil {
		r.res.add("DRA mode: usage sampler", "starts", err.Error(), false)
		return
	}
	r.runTogether(ctx, adm, sampler, owners)
}
