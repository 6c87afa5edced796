package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/dra"
	"github.com/gpushare/gpushare/pkg/draconvert"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// draProbe is what a TestDRA pod's container runs: it prints the GPU env the claim's CDI
// device gave it and the HAMi-core preload file, then sleeps.
const draProbe = "env | grep -E '^(NVIDIA_VISIBLE_DEVICES|ALIYUN_COM_GPU_MEM_[A-Z]+|CUDA_[A-Z_0-9]+)=' | sort; " +
	"echo PRELOAD=$(cat /etc/ld.so.preload); echo PROBED=yes; sleep 3600"

// draNode is TestDRA's shared cluster and real node.
type draNode struct {
	e    *env
	node *framework.RealNode
	// devices are the cards as the driver first published them, in its order.
	devices []resourceapi.Device
	// xids and procs are share-plugin's fake XID and GPU process files; library is the
	// HAMi-core stand-in it mounts; stateDir holds HAMi-core's counter folders,
	// pods/<claim UID>/<claim name>.
	xids, procs, library, stateDir string
}

// draPlacement is where a pod's claim was allocated: its devices and shares, by ascending
// card index.
type draPlacement struct {
	devices  []string
	shareIDs []string
}

// forSubtest is e for the subtest t: its helpers fail t, not the test that made e.
func (e *env) forSubtest(t *testing.T) *env {
	sub := *e
	sub.t = t
	return &sub
}

// names are the contract's default names.
func (e *env) names() contract.Names { return contract.DefaultNames() }

// draPod is the unchanged gpu-mem pod of the real-node tests (realNodePod: units of
// aliyun.com/gpu-mem in its limits, with annotations) whose container runs draProbe.
func (e *env) draPod(name string, units int64, annotations map[string]string) *v1.Pod {
	pod := e.realNodePod(name, units)
	pod.Annotations = annotations
	pod.Spec.Containers[0].Command = []string{"sh", "-c", draProbe}
	return pod
}

// checkPod waits until the pod runs and checks it end to end: converted by the webhook
// (checkConverted), its claim allocated cards devices of the node with units split evenly
// over them (checkClaim), and its container's env (checkDRAEnv). It returns the placement.
func (d *draNode) checkPod(t *testing.T, e *env, name string, units int64, cards int) draPlacement {
	t.Helper()
	pod := e.waitRunning(name, 2*time.Minute)
	checkConverted(t, pod, units)
	claim := draClaimOf(t, e, pod)
	p := d.checkClaim(t, claim, pod, units, cards)
	d.checkDRAEnv(t, e, name, units, p)
	if _, err := os.Stat(filepath.Join(d.stateDir, "pods", string(claim.UID), claim.Name)); err != nil {
		t.Errorf("pod %s: no HAMi-core counter folder for its claim: %v", name, err)
	}
	t.Logf("pod %s: claim %s on %v (shares %v)", name, claim.Name, p.devices, p.shareIDs)
	return p
}

// checkConverted checks what the webhook made of a one-container pod asking units: gpu-mem
// gone from its resources, one pod claim gpushare-0 from a template, named by the container,
// and the annotation recording the ask.
func checkConverted(t *testing.T, pod *v1.Pod, units int64) {
	t.Helper()
	var asked map[string]int64
	if err := json.Unmarshal([]byte(pod.Annotations[draconvert.AnnotationConverted]), &asked); err != nil {
		t.Errorf("pod %s: annotation %s=%q: %v", pod.Name, draconvert.AnnotationConverted, pod.Annotations[draconvert.AnnotationConverted], err)
	}
	if diff := cmp.Diff(map[string]int64{"main": units}, asked); diff != "" {
		t.Errorf("pod %s: annotation %s (-want,+got):\n%s", pod.Name, draconvert.AnnotationConverted, diff)
	}
	c := pod.Spec.Containers[0]
	_, lim := c.Resources.Limits[contract.DefaultResourceName]
	_, req := c.Resources.Requests[contract.DefaultResourceName]
	if lim || req {
		t.Errorf("pod %s still asks %s: limits %v, requests %v", pod.Name, contract.DefaultResourceName, c.Resources.Limits, c.Resources.Requests)
	}
	claim := draconvert.ClaimPrefix + "0"
	if diff := cmp.Diff([]v1.ResourceClaim{{Name: claim}}, c.Resources.Claims); diff != "" {
		t.Errorf("pod %s: container claims (-want,+got):\n%s", pod.Name, diff)
	}
	if len(pod.Spec.ResourceClaims) != 1 || pod.Spec.ResourceClaims[0].Name != claim || pod.Spec.ResourceClaims[0].ResourceClaimTemplateName == nil ||
		!strings.HasPrefix(*pod.Spec.ResourceClaims[0].ResourceClaimTemplateName, draconvert.ClaimPrefix) {
		t.Errorf("pod %s: resource claims %+v, want one %s from a %s* template", pod.Name, pod.Spec.ResourceClaims, claim, draconvert.ClaimPrefix)
	}
}

// draClaimOf returns the ResourceClaim the resource claim controller made of the pod's claim
// gpushare-0.
func draClaimOf(t *testing.T, e *env, pod *v1.Pod) *resourceapi.ResourceClaim {
	t.Helper()
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name != draconvert.ClaimPrefix+"0" || st.ResourceClaimName == nil {
			continue
		}
		claim, err := e.c.Client.ResourceV1().ResourceClaims(pod.Namespace).Get(e.ctx, *st.ResourceClaimName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("claim %s of pod %s: %v", *st.ResourceClaimName, pod.Name, err)
		}
		return claim
	}
	t.Fatalf("pod %s: claim statuses %+v, want %s0", pod.Name, pod.Status.ResourceClaimStatuses, draconvert.ClaimPrefix)
	return nil
}

// checkClaim checks that kube-scheduler allocated the claim cards distinct devices of the
// node's pool, each with units/cards GiB of memory consumed and a share of its own, and
// reserved it for the pod; it returns the placement.
func (d *draNode) checkClaim(t *testing.T, claim *resourceapi.ResourceClaim, pod *v1.Pod, units int64, cards int) draPlacement {
	t.Helper()
	if claim.Status.Allocation == nil {
		t.Fatalf("claim %s of pod %s not allocated", claim.Name, pod.Name)
	}
	results := claim.Status.Allocation.Devices.Results
	slices.SortFunc(results, func(a, b resourceapi.DeviceRequestAllocationResult) int {
		return d.index(t, a.Device) - d.index(t, b.Device)
	})
	var p draPlacement
	per := fmt.Sprintf("%dGi", units/int64(cards))
	for _, r := range results {
		mem := r.ConsumedCapacity[dra.CapacityMemory]
		if r.Request != draconvert.RequestName || r.Driver != dra.DefaultDriverName || r.Pool != framework.RealNodeName || mem.String() != per || r.ShareID == nil {
			t.Errorf("claim %s: result %+v, want request %s of %s from pool %s consuming %s memory, with a share ID", claim.Name, r,
				draconvert.RequestName, dra.DefaultDriverName, framework.RealNodeName, per)
			continue
		}
		p.devices, p.shareIDs = append(p.devices, r.Device), append(p.shareIDs, string(*r.ShareID))
	}
	if len(p.devices) != cards || len(slices.Compact(slices.Clone(p.devices))) != cards {
		t.Fatalf("claim %s of pod %s allocated %v, want %d distinct cards", claim.Name, pod.Name, p.devices, cards)
	}
	if !slices.ContainsFunc(claim.Status.ReservedFor, func(r resourceapi.ResourceClaimConsumerReference) bool { return r.UID == pod.UID }) {
		t.Errorf("claim %s reserved for %+v, not for pod %s", claim.Name, claim.Status.ReservedFor, pod.Name)
	}
	return p
}

// checkDRAEnv checks the env the pod's container printed (kubectl logs) and reads one limit
// through kubectl exec: the cards and indexes of its placement, its own units, the first
// card's units, HAMi-core's limit per card (its share, in MiB) and preload, and nothing of the
// pod total that a claim cannot know.
func (d *draNode) checkDRAEnv(t *testing.T, e *env, name string, units int64, p draPlacement) {
	t.Helper()
	got := draLogVars(t, e, name)
	want := map[string]string{
		contract.EnvContainer: strconv.FormatInt(units, 10), contract.EnvDev: strconv.Itoa(draCardUnits),
		"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "PRELOAD": d.library, "PROBED": "yes",
	}
	var uuids, idx []string
	for i, dev := range p.devices {
		uuids, idx = append(uuids, d.uuid(t, dev)), append(idx, strconv.Itoa(d.index(t, dev)))
		want[fmt.Sprintf("CUDA_DEVICE_MEMORY_LIMIT_%d", i)] = fmt.Sprintf("%dm", units/int64(len(p.devices))*1024)
	}
	want[contract.EnvVisibleDevices], want[contract.EnvIndex] = strings.Join(uuids, ","), strings.Join(idx, ",")
	for k, v := range want {
		if got[k] != v {
			t.Errorf("pod %s: %s=%q, want %q (all: %v)", name, k, got[k], v, got)
		}
	}
	for _, k := range []string{contract.EnvPod, fmt.Sprintf("CUDA_DEVICE_MEMORY_LIMIT_%d", len(p.devices))} {
		if v, ok := got[k]; ok {
			t.Errorf("pod %s: %s=%q, want it unset", name, k, v)
		}
	}
	out, err := e.kubectl("exec", name, "--", "sh", "-c", "echo $CUDA_DEVICE_MEMORY_LIMIT_0")
	if err != nil || strings.TrimSpace(out) != want["CUDA_DEVICE_MEMORY_LIMIT_0"] {
		t.Errorf("kubectl exec %s: CUDA_DEVICE_MEMORY_LIMIT_0=%q, %v; want %q", name, out, err, want["CUDA_DEVICE_MEMORY_LIMIT_0"])
	}
}

// draLogVars reads the NAME=value lines a pod running draProbe printed, through kubectl logs.
func draLogVars(t *testing.T, e *env, name string) map[string]string {
	t.Helper()
	vars, err := e.logVars(name, func(vars map[string]string) bool { return vars["PROBED"] == "yes" })
	if err != nil {
		t.Fatalf("pod %s never printed its env: %v", name, err)
	}
	return vars
}

// device returns the published device of that name.
func (d *draNode) device(t *testing.T, name string) *resourceapi.Device {
	t.Helper()
	for i := range d.devices {
		if d.devices[i].Name == name {
			return &d.devices[i]
		}
	}
	t.Fatalf("no published device %s", name)
	return nil
}

// index is a published device's NVML index.
func (d *draNode) index(t *testing.T, device string) int {
	t.Helper()
	i, err := strconv.Atoi(framework.DRAAttribute(d.device(t, device), dra.AttrIndex))
	if err != nil {
		t.Fatalf("device %s: index attribute: %v", device, err)
	}
	return i
}

// uuid is a published device's UUID.
func (d *draNode) uuid(t *testing.T, device string) string {
	t.Helper()
	return framework.DRAAttribute(d.device(t, device), dra.AttrUUID)
}

// removePodsAfter deletes the pods when t ends and waits until they, every claim of the
// namespace, every CDI spec of the driver and every HAMi-core counter folder are gone (the
// claims unprepared), so that the next subtest starts on empty cards.
func (d *draNode) removePodsAfter(t *testing.T, e *env, names ...string) {
	t.Cleanup(func() {
		for _, name := range names {
			err := e.c.Client.CoreV1().Pods("default").Delete(e.ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete pod %s: %v", name, err)
			}
		}
		var left string
		err := poll(e.ctx, 2*time.Minute, func() (bool, error) {
			pods, err := e.c.Client.CoreV1().Pods("default").List(e.ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			claims, err := e.c.Client.ResourceV1().ResourceClaims("default").List(e.ctx, metav1.ListOptions{})
			if err != nil {
				return false, err
			}
			specs, err := filepath.Glob(filepath.Join(d.node.CDISpecDir(), dra.DefaultDriverName+"_claim_*.json"))
			if err != nil {
				return false, err
			}
			counters, _ := filepath.Glob(filepath.Join(d.stateDir, "pods", "*"))
			left = fmt.Sprintf("%d pods, %d claims, %d CDI specs, %d counter folders", len(pods.Items), len(claims.Items), len(specs), len(counters))
			return len(pods.Items)+len(claims.Items)+len(specs)+len(counters) == 0, nil
		})
		if err != nil {
			t.Errorf("after deleting pods %v: %s left: %v", names, left, err)
		}
	})
}

// checkInvariants checks the DRA invariant on the node (framework.CheckDRAInvariants), with
// want the memory consumed on each card (device → units; the cards not named, none), and the
// framework's check of gpu-mem placements and the extender's audit (no pod asks gpu-mem any
// more: the audit must find its cache empty of them too).
func (d *draNode) checkInvariants(t *testing.T, e *env, want map[string]int64) {
	t.Helper()
	var inv framework.DRAInvariants
	err := poll(e.ctx, 30*time.Second, func() (bool, error) {
		var err error
		inv, err = e.c.CheckDRAInvariants(e.ctx, framework.RealNodeName, d.node.CDISpecDir())
		return err == nil && inv.OK(), err
	})
	t.Logf("DRA invariant: %s", inv)
	if err != nil {
		t.Errorf("DRA invariant broken: %s: %v", inv, err)
	}
	got := map[string]int64{}
	for _, c := range inv.Cards {
		if c.ConsumedBytes != 0 {
			got[c.Device] = c.ConsumedBytes >> 30
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GiB consumed per card (-want,+got):\n%s", diff)
	}
	ext, err := e.c.CheckInvariants(e.ctx, "default", e.ext)
	if err != nil {
		t.Fatal(err)
	}
	if !ext.OK() {
		t.Errorf("invariants: %s", ext)
	}
}

// extenderVerbs is how many filter, prioritize and bind calls the extender has answered.
func (e *env) extenderVerbs() float64 {
	e.t.Helper()
	m, err := e.ext.Metrics(e.ctx)
	if err != nil {
		e.t.Fatalf("extender metrics: %v", err)
	}
	return m["gpushare_filter_total"] + m["gpushare_prioritize_total"] + m["gpushare_bind_total"]
}

// checkPublishedCards checks the node's devices as the driver published them: one per card in
// NVML index order (--dra-device-order=index, the shipped DaemonSet's), each with its UUID,
// model and index, 15 GiB of shareable memory (16 GiB less the driver's reserve, in whole
// units) and 100 cores, and no taint.
func checkPublishedCards(t *testing.T, devices []resourceapi.Device) {
	t.Helper()
	type card struct {
		Name, Index, Memory, Cores string
		Shared, Named              bool
		Taints                     int
	}
	var want, got []card
	for i, dev := range devices {
		want = append(want, card{Name: fmt.Sprintf("gpu-%d", i), Index: strconv.Itoa(i), Memory: fmt.Sprintf("%dGi", draCardUnits), Cores: "100", Shared: true, Named: true})
		mem, cores := dev.Capacity[dra.CapacityMemory].Value, dev.Capacity[dra.CapacityCores].Value
		got = append(got, card{Name: dev.Name, Index: framework.DRAAttribute(&dev, dra.AttrIndex), Memory: mem.String(), Cores: cores.String(),
			Shared: dev.AllowMultipleAllocations != nil && *dev.AllowMultipleAllocations, Taints: len(dev.Taints),
			Named: framework.DRAAttribute(&dev, dra.AttrUUID) != "" && framework.DRAAttribute(&dev, dra.AttrModel) != ""})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("published devices (-want,+got):\n%s", diff)
	}
	uuids := map[string]bool{}
	for i := range devices {
		uuids[framework.DRAAttribute(&devices[i], dra.AttrUUID)] = true
	}
	if len(uuids) != len(devices) {
		t.Fatalf("%d devices with %d distinct UUIDs", len(devices), len(uuids))
	}
}
