package dra

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	k8sfake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/dynamic-resource-allocation/kubeletplugin"
	"k8s.io/klog/v2/ktesting"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/ptr"
	cdispec "tags.cncf.io/container-device-interface/specs-go"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin"
	dpfake "github.com/gpushare/gpushare/pkg/deviceplugin/fake"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/enforce"
)

// TestPrepareMatchesDevicePlugin: a claim gets the same card env and HAMi-core limits, mounts
// and counter file as device-plugin mode's Allocate gives a container asking the same memory
// on the same cards of the same host, with the same HAMi-core files. Only what cannot match
// differs: the counter folder is the claim's, and ALIYUN_COM_GPU_MEM_POD is not set.
func TestPrepareMatchesDevicePlugin(t *testing.T) {
	tests := []struct {
		name  string
		cards map[int]int64 // GPU index → GiB
		cores int64
	}{
		{name: "4 GiB on one card", cards: map[int]int64{1: 4}},
		{name: "4 GiB on one card, compute capped at 30%", cards: map[int]int64{1: 4}, cores: 30},
		{name: "two cards, 4 GiB each", cards: map[int]int64{1: 4, 3: 4}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			limits := hamiCoreConfig(t, dir, 0) // device-plugin mode's exported options cannot fake the tmpfs
			host := testHost(t)
			dpEnv, dpMounts := devicePluginAnswer(t, nvml.New(host), limits, tt.cards, tt.cores)

			cfg := testConfig(t, dir)
			cfg.Enforce = limits
			td := newTestDriver(t, cfg, host)
			claim := makeClaim("c")
			for g, units := range tt.cards {
				claim.device(deviceName(g), units*gib, tt.cores)
			}
			td.mustPrepare(t, claim.obj())
			dev := specOf(t, &cfg, claim.UID).Devices[0].ContainerEdits

			want := maps.Clone(dpEnv)
			delete(want, contract.EnvPod)
			if diff := cmp.Diff(want, envOf(dev.Env)); diff != "" {
				t.Errorf("env (-device plugin,+DRA):\n%s", diff)
			}
			counters := filepath.Join(limits.StateDir, "pods", string(claim.UID), claim.Name)
			var got []string
			for _, m := range dev.Mounts {
				got = append(got, m.ContainerPath+" <- "+m.HostPath+" "+m.Options[0])
			}
			wantMounts := make([]string, len(dpMounts))
			for i, m := range dpMounts {
				host, mode := m.HostPath, "rw"
				if m.ContainerPath == enforce.ContainerCacheDir {
					host = counters
				}
				if m.ReadOnly {
					mode = "ro"
				}
				wantMounts[i] = m.ContainerPath + " <- " + host + " " + mode
			}
			if diff := cmp.Diff(wantMounts, got); diff != "" {
				t.Errorf("mounts (-device plugin,+DRA):\n%s", diff)
			}
		})
	}
}

// devicePluginAnswer is device-plugin mode's Allocate answer for a container asking GiB on
// cards (GPU index → GiB) with a compute cap, on host with limits.
func devicePluginAnswer(t *testing.T, host nvml.Interface, limits enforce.Config, cards map[int]int64, cores int64) (map[string]string, []*pluginapi.Mount) {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	var total int64
	perGPU := map[int]int64{}
	for g, units := range cards {
		total += units
		perGPU[g] = units
	}
	pod := st.MakePod().Name("p").Node(testNode).Annotation(contract.DefaultGPUsPerContainer, strconv.Itoa(len(cards))).
		NamedGPUMem("c", total).Allocation(contract.Allocation{"0": perGPU})
	if cores > 0 {
		pod.Annotation(contract.DefaultCoreKey, strconv.FormatInt(cores, 10))
	}
	client := k8sfake.NewClientset(pod.Obj())
	p, err := deviceplugin.New(host, client, deviceplugin.WithNodeName(testNode), deviceplugin.WithPodSource(dpfake.ClientPods{Client: client, Node: testNode}),
		deviceplugin.WithResolveWait(0), deviceplugin.WithHealthCheck(false), deviceplugin.WithMemoryLimit(limits),
		deviceplugin.WithReserveMemory(testReserve), deviceplugin.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for g, units := range cards {
		d, err := host.Device(g)
		if err != nil {
			t.Fatal(err)
		}
		for n := range units {
			ids = append(ids, d.UUID+"::"+strconv.FormatInt(n, 10))
		}
	}
	resp, err := p.Allocate(ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
	if err != nil {
		t.Fatalf("device plugin Allocate: %v", err)
	}
	return resp.ContainerResponses[0].Envs, resp.ContainerResponses[0].Mounts
}

// specOf reads and parses a claim's CDI spec.
func specOf(t *testing.T, cfg *Config, uid types.UID) cdispec.Spec {
	t.Helper()
	var spec cdispec.Spec
	if err := json.Unmarshal(readSpecFile(t, cfg, uid), &spec); err != nil {
		t.Fatal(err)
	}
	return spec
}

func TestPrepareAndUnprepare(t *testing.T) {
	tests := []struct {
		name  string
		claim *resourceapi.ResourceClaim
		// want: the claim's env (of the contract and HAMi-core's limits) by name; the kubelet
		// answer's devices as "device share CDI IDs requests".
		wantEnv     map[string]string
		wantDevices []string
	}{
		{
			name:  "4 GiB of one card",
			claim: makeClaim("one").device("gpu-2", 4*gib, 0).obj(),
			wantEnv: map[string]string{"NVIDIA_VISIBLE_DEVICES": uuid(2), "ALIYUN_COM_GPU_MEM_IDX": "2", "ALIYUN_COM_GPU_MEM_CONTAINER": "4",
				"ALIYUN_COM_GPU_MEM_DEV": "39", "CUDA_DEVICE_MEMORY_LIMIT_0": "4096m"},
			wantDevices: []string{"gpu-2 share-one-0 [gpushare.aliyun.com/gpu=uid-one] []"},
		},
		{
			name:  "two devices, listed out of index order, with a compute cap",
			claim: makeClaim("two").device("gpu-3", 6*gib, 25).device("gpu-0", 6*gib, 25).obj(),
			wantEnv: map[string]string{"NVIDIA_VISIBLE_DEVICES": uuid(0) + "," + uuid(3), "ALIYUN_COM_GPU_MEM_IDX": "0,3", "ALIYUN_COM_GPU_MEM_CONTAINER": "12",
				"ALIYUN_COM_GPU_MEM_DEV": "39", "CUDA_DEVICE_MEMORY_LIMIT_0": "6144m", "CUDA_DEVICE_MEMORY_LIMIT_1": "6144m", "CUDA_DEVICE_SM_LIMIT": "25"},
			wantDevices: []string{"gpu-3 share-two-0 [gpushare.aliyun.com/gpu=uid-two] []", "gpu-0 share-two-1 [] [gpu]"},
		},
		{
			name: "two shares of one card (two requests) are one limit",
			claim: makeClaim("same").device("gpu-1", 2*gib, 10).device("gpu-1", 3*gib, 10).
				with(func(r *resourceapi.DeviceRequestAllocationResult) { r.Request = "more" }).obj(),
			wantEnv: map[string]string{"NVIDIA_VISIBLE_DEVICES": uuid(1), "ALIYUN_COM_GPU_MEM_IDX": "1", "ALIYUN_COM_GPU_MEM_CONTAINER": "5",
				"ALIYUN_COM_GPU_MEM_DEV": "39", "CUDA_DEVICE_MEMORY_LIMIT_0": "5120m", "CUDA_DEVICE_SM_LIMIT": "20"},
			wantDevices: []string{"gpu-1 share-same-0 [gpushare.aliyun.com/gpu=uid-same] []", "gpu-1 share-same-1 [] [more]"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			td := newTestDriver(t, cfg, testHost(t))
			first := prepareOne(t, td, tt.claim)
			if diff := cmp.Diff(tt.wantDevices, first); diff != "" {
				t.Errorf("kubelet answer (-want,+got):\n%s", diff)
			}
			spec := specOf(t, &cfg, tt.claim.UID)
			if spec.Kind != "gpushare.aliyun.com/gpu" || len(spec.Devices) != 1 || spec.Devices[0].Name != string(tt.claim.UID) {
				t.Fatalf("spec kind %q devices %+v: want kind gpushare.aliyun.com/gpu, one device named after the claim's UID", spec.Kind, spec.Devices)
			}
			if err := cdispec.ValidateVersion(&spec); err != nil {
				t.Error(err)
			}
			env := envOf(spec.Devices[0].ContainerEdits.Env)
			for k, v := range tt.wantEnv {
				if env[k] != v {
					t.Errorf("%s=%q, want %q", k, env[k], v)
				}
			}
			if sm, want := env[enforce.EnvSMLimit], tt.wantEnv[enforce.EnvSMLimit]; sm != want {
				t.Errorf("%s=%q, want %q", enforce.EnvSMLimit, sm, want)
			}
			counters := filepath.Join(cfg.Enforce.StateDir, "pods", string(tt.claim.UID), tt.claim.Name)
			if size := td.mounter.Mounted[counters]; size != enforce.DefaultCounterSize {
				t.Errorf("counter folder %s bounded by %d bytes, want %d (mounted: %v)", counters, size, enforce.DefaultCounterSize, td.mounter.Mounted)
			}

			checkRepeatAndUnprepare(t, td, tt.claim, first, counters)
		})
	}
}

// checkRepeatAndUnprepare prepares claim again (kubelet restarted), which must give the same
// answer (first) and write the same spec, then unprepares it, which must remove its spec and
// its counter folder and unmount it, twice (the second time it is not prepared: no error).
func checkRepeatAndUnprepare(t *testing.T, td *testDriver, claim *resourceapi.ResourceClaim, first []string, counters string) {
	t.Helper()
	cfg := &td.cfg
	before := readSpecFile(t, cfg, claim.UID)
	if again := prepareOne(t, td, claim); !cmp.Equal(first, again) {
		t.Errorf("second prepare answered %v, first %v", again, first)
	}
	if after := readSpecFile(t, cfg, claim.UID); string(after) != string(before) {
		t.Errorf("second prepare rewrote the spec:\n%s\nwas:\n%s", after, before)
	}
	unprepare(t, td, claim)
	if _, err := os.Stat(filepath.Join(cfg.CDIRoot, "gpushare.aliyun.com_claim_"+string(claim.UID)+".json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("CDI spec still there after unprepare: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(counters)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("counter folder still there after unprepare: %v", err)
	}
	if _, ok := td.mounter.Mounted[counters]; ok {
		t.Errorf("counter tmpfs %s still mounted after unprepare", counters)
	}
	unprepare(t, td, claim)
}

// uuid is the UUID mockhost gives card i.
func uuid(i int) string { return fmt.Sprintf("GPU-%08x-0000-4000-8000-%012x", 0x6a5e0000+i, i) }

// prepareOne prepares claim, which must succeed, and renders kubelet's answer as
// "device share CDI-IDs requests" per device.
func prepareOne(t *testing.T, td *testDriver, claim *resourceapi.ResourceClaim) []string {
	t.Helper()
	res, err := td.PrepareResourceClaims(td.ctx, []*resourceapi.ResourceClaim{claim})
	if err != nil {
		t.Fatal(err)
	}
	r := res[claim.UID]
	if r.Err != nil {
		t.Fatalf("prepare %s: %v", claim.Name, r.Err)
	}
	return renderDevices(r.Devices)
}

func renderDevices(devs []kubeletplugin.Device) []string {
	var out []string
	for _, d := range devs {
		if d.PoolName != testNode {
			out = append(out, "pool "+d.PoolName)
		}
		out = append(out, d.DeviceName+" "+string(ptr.Deref(d.ShareID, ""))+" ["+strings.Join(d.CDIDeviceIDs, ",")+"] ["+strings.Join(d.Requests, ",")+"]")
	}
	return out
}

// unprepare unprepares claim, which must succeed.
func unprepare(t *testing.T, td *testDriver, claim *resourceapi.ResourceClaim) {
	t.Helper()
	res, err := td.UnprepareResourceClaims(td.ctx, []kubeletplugin.NamespacedObject{{UID: claim.UID,
		NamespacedName: types.NamespacedName{Namespace: claim.Namespace, Name: claim.Name}}})
	if err != nil || res[claim.UID] != nil {
		t.Fatalf("unprepare %s: %v, %v", claim.Name, err, res[claim.UID])
	}
}
