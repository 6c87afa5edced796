package deviceplugin

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml/mockhost"
)

// The node of the device plugin's fuzz targets: fuzzGPUs GPUs (indexes 0 to 3) of
// fuzzGPUUnits units.
const (
	fuzzGPUs     = 4
	fuzzGPUUnits = 8
)

// fuzzHost is the mock host of that node.
func fuzzHost() mockhost.Options {
	return mockhost.Options{GPUs: fuzzGPUs, MemoryBytes: fuzzGPUUnits << 30}
}

// fuzzDeviceIDs splits a comma-separated list of device IDs. An entry "@<c><rest>" stands for
// the UUID of GPU c%4 followed by rest ("@0::3" is unit 3 of GPU 0), so that the fuzzer reaches
// real IDs and varies only what follows the UUID; other entries are taken as they are. An empty
// list has no IDs.
func fuzzDeviceIDs(p *Plugin, list string) []string {
	if list == "" {
		return nil
	}
	uuids := p.inv.uuids()
	ids := strings.Split(list, ",")
	for i, id := range ids {
		if len(id) >= 2 && id[0] == '@' {
			ids[i] = uuids[int(id[1])%len(uuids)] + id[2:]
		}
	}
	return ids
}

// fuzzPlacedPod is pod "p" bound to the plugin's node with one container "c" asking units, and
// the annotations that are not empty: the placement, the predecessor's GPU index and gpu-count.
func fuzzPlacedPod(units int64, alloc, idx, count string) *v1.Pod {
	w := st.MakePod().Name("p").Node(testNode).NamedGPUMem("c", units)
	for k, v := range map[string]string{contract.AnnotationAllocation: alloc, contract.AnnotationIndex: idx, contract.DefaultGPUsPerContainer: count} {
		if v != "" {
			w.Annotation(k, v)
		}
	}
	return w.Obj()
}

// advertised is the set of device IDs the plugin lists to kubelet.
func advertised(p *Plugin) map[string]bool {
	devs, _ := p.inv.devices()
	out := make(map[string]bool, len(devs))
	for _, d := range devs {
		out[d.ID] = true
	}
	return out
}

// FuzzAllocate calls Allocate for one container with fuzzed device IDs (see fuzzDeviceIDs) on
// a node with one pod whose size, placement annotation, predecessor's index annotation and
// gpu-count annotation are fuzzed. The answer must be exactly what the contract says: an ID
// the plugin never advertised, or one named twice, is InvalidArgument; no pod waiting for that many units is
// NotFound; a pod without a usable placement (none, a card the node lacks, or not the
// container's ask split evenly over its gpu-count cards), or one that would put a card over
// its capacity, is FailedPrecondition; otherwise the env names the container's cards of the placement, in
// index order, with the pod's and the container's units. Nothing panics, every failure is a
// gRPC status, and a second Allocate never gets the same container.
func FuzzAllocate(f *testing.F) {
	f.Add("@0::0,@0::1,@0::2,@0::3", `{"0":{"1":4}}`, "1", "", uint8(4))
	f.Add("@0::0,@0::1", `{"0":{"3":1,"0":1}}`, "", "2", uint8(2))
	f.Add("@1::7", "", "2", "", uint8(1))
	f.Add("@1::7", "", "9", "", uint8(1))
	f.Add("@1::7", `{"0":{"9":1}}`, "", "", uint8(1))
	f.Add("@2::0,@2::1", `{"0":{"0":2},"init-0":{"1":9}}`, "", "", uint8(2))
	f.Add("@0::8", `{"0":{"0":1}}`, "", "", uint8(1))
	f.Add("@0::-1", `{"0":{"0":1}}`, "", "", uint8(1))
	f.Add("@0::01", `{"0":{"0":1}}`, "", "", uint8(1))
	f.Add("@0::+1", `{"0":{"0":1}}`, "", "", uint8(1))
	f.Add("@0::1::1", `{"0":{"0":1}}`, "", "", uint8(1))
	f.Add("GPU-nope::0", `{"0":{"0":1}}`, "", "", uint8(1))
	f.Add("", `{"0":{"0":1}}`, "", "", uint8(1))
	f.Add("@0::0", `{"0":{}}`, "", "", uint8(1))
	f.Add("@0::0", `{"1":{"0":1}}`, "", "", uint8(1))
	f.Add("@0::0", `{`, "0", "", uint8(1))
	f.Add("@0::0,@0::0", `{"0":{"0":2}}`, "", "", uint8(2))
	f.Fuzz(func(t *testing.T, idList, alloc, idx, count string, units uint8) {
		pod := fuzzPlacedPod(1+int64(units-1)%fuzzGPUUnits, alloc, idx, count) // 1 to 8, 0 is 8
		h := newHarness(t, noPodResources, fuzzHost(), pod)
		ids := fuzzDeviceIDs(h.p, idList)
		resp, err := h.p.Allocate(h.ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
		wantCode, wantEnv := expectAllocate(h.p, pod, ids)
		s, ok := status.FromError(err)
		if !ok {
			t.Fatalf("Allocate(%q) error %v is not a gRPC status", ids, err)
		}
		if s.Code() != wantCode {
			t.Fatalf("Allocate(%q) for pod %v = %v, want code %v", ids, pod.Annotations, err, wantCode)
		}
		if err != nil {
			if resp != nil {
				t.Errorf("Allocate(%q) answered %v with its error", ids, resp)
			}
			return
		}
		if len(resp.ContainerResponses) != 1 {
			t.Fatalf("Allocate answered %d containers, want 1", len(resp.ContainerResponses))
		}
		if diff := cmp.Diff(wantEnv, resp.ContainerResponses[0].Envs); diff != "" {
			t.Errorf("env (-want,+got):\n%s", diff)
		}
		_, err = h.p.Allocate(h.ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIds: ids}}})
		if status.Code(err) != codes.NotFound {
			t.Errorf("second Allocate for the pod's only container = %v, want NotFound", err)
		}
	})
}

// expectAllocate is the contract's answer to an Allocate of ids on FuzzAllocate's node, which
// holds pod alone: the gRPC code and, for OK, the container's env.
func expectAllocate(p *Plugin, pod *v1.Pod, ids []string) (codes.Code, map[string]string) {
	known := advertised(p)
	if len(ids) == 0 || slices.ContainsFunc(ids, func(id string) bool { return !known[id] }) ||
		len(slices.Compact(slices.Sorted(slices.Values(ids)))) != len(ids) { // an ID named twice
		return codes.InvalidArgument, nil
	}
	names := contract.DefaultNames()
	req, err := contract.ParseRequest(pod, &names)
	if err != nil || req.Empty() || req.Containers[0].Units != int64(len(ids)) {
		return codes.NotFound, nil
	}
	alloc, ok, err := contract.AllocationFromPod(pod, &req)
	own := alloc[req.Containers[0].Key]
	if err != nil || !ok || len(own) == 0 || slices.ContainsFunc(slices.Collect(maps.Keys(own)), func(g int) bool { return g < 0 || g >= fuzzGPUs }) {
		return codes.FailedPrecondition, nil // no usable placement
	}
	if !placedAsAsked(req.Containers[0], own) {
		return codes.FailedPrecondition, nil // a placement that does not match the ask (forged)
	}
	for g, u := range alloc.PerGPU() {
		if g >= 0 && g < fuzzGPUs && u > fuzzGPUUnits {
			return codes.FailedPrecondition, nil // would put the card over capacity
		}
	}
	cards := slices.Sorted(maps.Keys(own))
	uuids, idx := make([]string, len(cards)), make([]string, len(cards))
	for i, g := range cards {
		uuids[i], idx[i] = p.inv.uuids()[g], strconv.Itoa(g)
	}
	return codes.OK, map[string]string{
		contract.EnvVisibleDevices: strings.Join(uuids, ","),
		contract.EnvIndex:          strings.Join(idx, ","),
		contract.EnvPod:            strconv.FormatInt(req.TotalUnits(), 10),
		contract.EnvContainer:      strconv.FormatInt(req.Containers[0].Units, 10),
		contract.EnvDev:            strconv.Itoa(fuzzGPUUnits),
	}
}

// placedAsAsked is the contract's rule for a container's placement, written independently of
// contract.CheckPlacement: exactly c.GPUs cards, c.Units/c.GPUs units on each.
func placedAsAsked(c contract.ContainerRequest, own map[int]int64) bool {
	if len(own) != c.GPUs {
		return false
	}
	for _, u := range own {
		if u*int64(c.GPUs) != c.Units {
			return false
		}
	}
	return true
}

// FuzzPreferredAllocation calls GetPreferredAllocation with fuzzed available and must-include
// device IDs (see fuzzDeviceIDs) and size, on a node with a 4-unit pod whose placement
// annotation is fuzzed. It never fails; the answer starts with the must-include IDs, then adds
// distinct available IDs that the plugin advertised and that were not among them, until it has
// size IDs or runs out.
func FuzzPreferredAllocation(f *testing.F) {
	f.Add("@0::0,@0::1,@1::0,@1::1,@1::2,@1::3,@2::0", "", int32(4), `{"0":{"1":4}}`)
	f.Add("@0::0,@0::1,@1::0,@1::1", "@3::7", int32(4), `{"0":{"1":2,"2":2}}`)
	f.Add("@0::0,@0::0,@0::1,junk,@0::9", "", int32(4), `{"0":{"0":4}}`)
	f.Add("@0::0,@0::1", "@0::0,@0::0,nope", int32(2), "")
	f.Add("@0::0", "", int32(-1), `{"0":{"0":4}}`)
	f.Add("", "", int32(0), `{`)
	f.Fuzz(func(t *testing.T, available, must string, size int32, alloc string) {
		h := newHarness(t, noPodResources, fuzzHost(), fuzzPlacedPod(4, alloc, "", ""))
		avail, mustIDs := fuzzDeviceIDs(h.p, available), fuzzDeviceIDs(h.p, must)
		resp, err := h.p.GetPreferredAllocation(h.ctx, &pluginapi.PreferredAllocationRequest{ContainerRequests: []*pluginapi.ContainerPreferredAllocationRequest{
			{AvailableDeviceIDs: avail, MustIncludeDeviceIDs: mustIDs, AllocationSize: size}}})
		if err != nil || len(resp.ContainerResponses) != 1 {
			t.Fatalf("GetPreferredAllocation() = %v, %v; want one answer", resp, err)
		}
		got := resp.ContainerResponses[0].DeviceIDs
		if len(got) < len(mustIDs) || !slices.Equal(got[:len(mustIDs)], mustIDs) {
			t.Fatalf("answer %q does not start with the must-include IDs %q", got, mustIDs)
		}
		known := advertised(h.p)
		pool := map[string]bool{}
		for _, id := range avail {
			pool[id] = known[id] && !slices.Contains(mustIDs, id)
		}
		added := got[len(mustIDs):]
		for i, id := range added {
			if !pool[id] || slices.Contains(added[:i], id) {
				t.Errorf("answer %q adds %q: not an advertised available ID, or taken twice", got, id)
			}
		}
		choices := 0
		for _, ok := range pool {
			if ok {
				choices++
			}
		}
		if want := min(max(0, int(size)-len(mustIDs)), choices); len(added) != want {
			t.Errorf("answer %q adds %d IDs, want %d (size %d, %d must-include, %d to choose from)", got, len(added), want, size, len(mustIDs), choices)
		}
	})
}
