package e2e

import (
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/deviceplugin"
	gpuusage "github.com/gpushare/gpushare/pkg/deviceplugin/usage"
	"github.com/gpushare/gpushare/pkg/dra"
	"github.com/gpushare/gpushare/pkg/draconvert"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// The node of TestDRA: three mocked 16 GiB cards whose driver reserves 450 MiB each, so each
// publishes 15 GiB (whole units of 1 GiB), and the pods' asks.
const (
	draCards      = 3
	draCardMemory = "16Gi"
	draCardUnits  = 15
	draPodUnits   = 4
)

// TestDRA runs DRA mode end to end on one real node shared by its subtests (starting the node
// is the cost): kube-apiserver, kube-controller-manager (with the resource claim controller)
// and kube-scheduler v1.37.1 with their default feature gates, a real kubelet on containerd v2
// with CDI, share-plugin --mode=dra on mocked NVML (three cards) with the shipped DaemonSet's
// flags and HAMi-core limits, acting as the driver's service account (config/dra/rbac.yaml),
// the shipped DeviceClass, and the extender serving the conversion webhook
// (config/dra/webhook.yaml, --dra-webhook). Every pod is created from the unchanged gpu-mem
// manifest of the device-plugin tests (`limits: {aliyun.com/gpu-mem: N}`, with the
// gpu-count annotation where it asks two cards). Each subtest removes its pods and waits for
// their claims to be unprepared, so the next starts on empty cards, and ends with the DRA
// invariant (per card, consumed memory ≤ capacity and = the limits handed out) and the
// extender's own check (CheckInvariants). TaintedDevice taints a card for the rest of the
// driver's life, so it runs after the others but ClaimsAtTheDoor, which restarts the extender.
func TestDRA(t *testing.T) {
	d := startDRANode(t)
	t.Run("SharedCard", func(t *testing.T) { d.sharedCard(t, "shared") })
	t.Run("TwoCardAsk", d.twoCardAsk)
	t.Run("RefusedAtCreation", d.refusedAtCreation)
	t.Run("ExtenderOff", d.extenderOff)
	t.Run("Policed", d.policed)
	t.Run("TaintedDevice", d.taintedDevice)
	t.Run("ClaimsAtTheDoor", d.claimsAtTheDoor)
}

// sharedCard (TestDRA/SharedCard, and ExtenderOff's specs): two pods asking 4 units each get
// their own claims on one card, the first published (kube-scheduler's allocator is first-fit
// in the driver's order), with distinct shares; each container sees only its own limit
// (CUDA_DEVICE_MEMORY_LIMIT_0=4096m) and the card's UUID, as device-plugin mode's Allocate
// gives them.
func (d *draNode) sharedCard(t *testing.T, prefix string) {
	e := d.e.forSubtest(t)
	names := []string{prefix + "-a", prefix + "-b"}
	d.removePodsAfter(t, e, names...)
	verbs := e.extenderVerbs()
	for _, name := range names {
		e.create(e.draPod(name, draPodUnits, nil))
		e.waitBound(name, time.Minute)
	}
	a, b := d.checkPod(t, e, names[0], draPodUnits, 1), d.checkPod(t, e, names[1], draPodUnits, 1)
	if a.devices[0] != b.devices[0] || a.devices[0] != d.devices[0].Name {
		t.Errorf("%s on %v, %s on %v: want both on %s, the first card published", names[0], a.devices, names[1], b.devices, d.devices[0].Name)
	}
	if a.shareIDs[0] == "" || a.shareIDs[0] == b.shareIDs[0] {
		t.Errorf("shares %q and %q of one card: want two distinct share IDs", a.shareIDs[0], b.shareIDs[0])
	}
	d.checkInvariants(t, e, map[string]int64{d.devices[0].Name: 2 * draPodUnits})
	// One node is feasible, and the converted pods ask no gpu-mem: kube-scheduler calls the
	// extender's filter for none of them, and skips scoring with one feasible node.
	t.Logf("the extender answered %.0f filter, prioritize and bind calls for these pods", e.extenderVerbs()-verbs)
}

// twoCardAsk (TestDRA/TwoCardAsk): a pod asking 8 units over gpushare.io/gpu-count: 2 gets one
// claim of two distinct cards, 4 GiB consumed on each; its container sees both cards and a
// limit of 4096m on each.
func (d *draNode) twoCardAsk(t *testing.T) {
	e := d.e.forSubtest(t)
	const name = "two-cards"
	d.removePodsAfter(t, e, name)
	e.create(e.draPod(name, 2*draPodUnits, map[string]string{e.names().GPUCountAnnotation: "2"}))
	p := d.checkPod(t, e, name, 2*draPodUnits, 2)
	if p.devices[0] == p.devices[1] {
		t.Errorf("pod %s got card %s twice, want two distinct cards", name, p.devices[0])
	}
	if p.devices[0] != d.devices[0].Name || p.devices[1] != d.devices[1].Name {
		t.Errorf("pod %s on %v, want the first two cards published (%s, %s): the allocator is first-fit", name, p.devices,
			d.devices[0].Name, d.devices[1].Name)
	}
	d.checkInvariants(t, e, map[string]int64{d.devices[0].Name: draPodUnits, d.devices[1].Name: draPodUnits})
}

// extenderOff (TestDRA/ExtenderOff): the specs of SharedCard with kube-scheduler restarted
// without any extender (a managed control plane's), the extender still running and serving
// only the webhook: the pods are placed and held to their limits alike, and the extender
// answers no filter, prioritize or bind meanwhile. The shipped configuration is restored after.
func (d *draNode) extenderOff(t *testing.T) {
	e := d.e.forSubtest(t)
	before := e.extenderVerbs()
	if err := e.c.RestartSchedulerAlone(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.c.RestartSchedulerShipped(e.ext.Host()); err != nil {
			t.Errorf("restore kube-scheduler with the extender: %v", err)
		}
	})
	d.sharedCard(t, "off")
	if after := e.extenderVerbs(); after != before {
		t.Errorf("the extender answered %.0f scheduling verbs with kube-scheduler configured without it, want 0", after-before)
	}
}

// policed (TestDRA/Policed): DRA mode reads GPU usage and polices limits as device-plugin mode
// does, each container's ask and limit read from the claim prepared for it. Two 4-unit pods
// share the first card; the plugin's metrics show each container's 4 GiB limit on that card.
// NVML then reports the first pod's process using 4 GiB plus the CUDA context allowance plus
// 1 MiB on the card and the second's 4 GiB: the first gets a GPUMemoryLimitEscaped event and
// its process is killed (the container restarts), the second runs on, unwarned, its 4 GiB used
// and 4 GiB asked in the metrics.
func (d *draNode) policed(t *testing.T) {
	e := d.e.forSubtest(t)
	over, within, unpreloaded := "policed-over", "policed-within", "policed-unpreloaded"
	d.removePodsAfter(t, e, over, within, unpreloaded)
	t.Cleanup(func() { writeGPUProcesses(t, d.procs, nil) })
	importGPUProcImage(t, d.node, artifactDir(t))
	if err := d.node.ImportBusyboxImage(escapeImage, map[string]framework.ImageFile{"etc/ld.so.preload": {Link: "/tmp/preload"}}); err != nil {
		t.Fatal(err)
	}
	pids := map[string]int{}
	for _, name := range []string{over, within} {
		p := e.draPod(name, draPodUnits, nil)
		p.Spec.Containers[0].Image = gpuImage
		p.Spec.Containers[0].Command[2] = strings.TrimSuffix(draProbe, "sleep 3600") + "exec /bin/gpuproc"
		e.create(p)
		d.checkPod(t, e, name, draPodUnits, 1)
		pids[name] = e.hostPID(t, e.waitRunning(name, time.Minute), "gpuproc")
	}
	const limit = draPodUnits << 30
	uuid := framework.DRAAttribute(&d.devices[0], dra.AttrUUID)
	series := func(metric, pod string, card bool) string {
		if card {
			return fmt.Sprintf(`%s{container="main",gpu_uuid="%s",namespace="default",pod="%s"}`, metric, uuid, pod)
		}
		return fmt.Sprintf(`%s{container="main",namespace="default",pod="%s"}`, metric, pod)
	}
	checkPluginSeries(t, e.c.PluginMetricsURL, map[string]float64{
		series("gpushare_container_gpu_memory_limit_bytes", over, true):   limit,
		series("gpushare_container_gpu_memory_limit_bytes", within, true): limit,
	})
	writeGPUProcesses(t, d.procs, map[string][]map[string]int64{"0": {
		{"pid": int64(pids[over]), "usedBytes": limit + gpuusage.DefaultContextAllowanceBytes + 1<<20},
		{"pid": int64(pids[within]), "usedBytes": limit},
	}})
	t.Logf("%s: %s", over, e.waitEvent(over, gpuusage.ReasonLimitEscaped, "escaped its GPU memory limit"))
	e.waitRestarted(t, over, time.Minute)
	if processAlive(pids[over]) {
		t.Errorf("process %d of %s, over its limit, still runs", pids[over], over)
	}
	if !processAlive(pids[within]) {
		t.Errorf("process %d of %s, within its limit, was killed", pids[within], within)
	}
	checkPluginSeries(t, e.c.PluginMetricsURL, map[string]float64{
		series("gpushare_container_gpu_memory_used_bytes", within, true):       limit,
		series("gpushare_container_gpu_memory_requested_bytes", within, false): limit,
	})
	if ev := e.events(within); strings.Contains(ev, gpuusage.ReasonLimitEscaped) || strings.Contains(ev, gpuusage.ReasonOverRequest) {
		t.Errorf("%s, within its limit, was warned:\n%s", within, ev)
	}
	// A container that removes the preload the claim's CDI device mounted (an image whose
	// /etc/ld.so.preload is a symlink got it mounted where the symlink points, and can remove
	// the link; DRA has no PreStartContainer to refuse the image first) is caught by the same
	// policing, GPU process or not. Its pod asks no gpu-mem: it names a claim written by hand,
	// which neither the webhook nor the pod-requests policy sees.
	claim := handWrittenClaim(unpreloaded, draPodUnits)
	if _, err := e.c.Client.ResourceV1().ResourceClaims("default").Create(e.ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before removePodsAfter's wait: a claim written by hand outlives its pod
		if err := e.c.Client.ResourceV1().ResourceClaims("default").Delete(e.ctx, claim.Name, metav1.DeleteOptions{}); err != nil {
			t.Errorf("delete claim %s: %v", claim.Name, err)
		}
	})
	p := e.draPod(unpreloaded, 0, nil)
	c := &p.Spec.Containers[0]
	c.Image, c.Command[2] = escapeImage, "rm -f /etc/ld.so.preload; exec sleep 3600"
	c.Resources = v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}
	p.Spec.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claim.Name}}
	e.create(p)
	t.Logf("%s: %s", unpreloaded, e.waitEvent(unpreloaded, gpuusage.ReasonLimitEscaped, "/etc/ld.so.preload"))
	e.waitRestarted(t, unpreloaded, time.Minute)
	d.checkInvariants(t, e, map[string]int64{d.devices[0].Name: 3 * draPodUnits})
}

// handWrittenClaim is a ResourceClaim as a user would write it for the shipped DeviceClass,
// without the webhook: one device, units GiB of its memory.
func handWrittenClaim(name string, units int64) *resourceapi.ResourceClaim {
	return &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
			Name: "gpu",
			Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: draconvert.DefaultDeviceClass, Count: 1,
				AllocationMode: resourceapi.DeviceAllocationModeExactCount,
				Capacity: &resourceapi.CapacityRequirements{Requests: map[resourceapi.QualifiedName]resource.Quantity{
					dra.CapacityMemory: *resource.NewQuantity(units<<30, resource.BinarySI)}}},
		}}}}}
}

// checkPluginSeries waits until the plugin's metrics (url) have each series of want with its
// value.
func checkPluginSeries(t *testing.T, url string, want map[string]float64) {
	t.Helper()
	got := map[string]float64{}
	err := poll(t.Context(), time.Minute, func() (bool, error) {
		m, err := framework.ScrapeMetrics(t.Context(), http.DefaultClient, url)
		if err != nil {
			return false, nil //nolint:nilerr // the plugin may not serve yet
		}
		for k := range want {
			got[k] = m[k]
		}
		return maps.Equal(want, got), nil
	})
	if err != nil {
		t.Errorf("the plugin's metrics: %v (-want,+got):\n%s", err, cmp.Diff(want, got))
	}
}

// taintedDevice (TestDRA/TaintedDevice): a pod takes the first card; an XID the application
// caused (13) on the second card is ignored, a critical one (79) on the first taints its
// device NoSchedule in the ResourceSlice (gpushare.aliyun.com/unhealthy=xid-79); the pod on it
// keeps running and gets a GPUUnhealthy Warning. A new 4-unit pod, which first-fit would put
// on the first card (11 GiB free there), gets the second.
func (d *draNode) taintedDevice(t *testing.T) {
	e := d.e.forSubtest(t)
	d.removePodsAfter(t, e, "victim", "newcomer")
	e.create(e.draPod("victim", draPodUnits, nil))
	victim := d.checkPod(t, e, "victim", draPodUnits, 1)
	sick, well := d.devices[0], d.devices[1]
	if victim.devices[0] != sick.Name {
		t.Fatalf("victim on %s, want %s, the first card published", victim.devices[0], sick.Name)
	}
	appendXIDs(t, d.xids, framework.DRAAttribute(&well, dra.AttrIndex)+" 13", framework.DRAAttribute(&sick, dra.AttrIndex)+" 79")
	d.waitTaints(t, e, map[string]string{sick.Name: "xid-79"})
	e.waitPodEvent("victim", deviceplugin.ReasonGPUUnhealthy, "critical XID 79", "of node "+framework.RealNodeName)

	e.create(e.draPod("newcomer", draPodUnits, nil))
	newcomer := d.checkPod(t, e, "newcomer", draPodUnits, 1)
	if newcomer.devices[0] != well.Name {
		t.Errorf("newcomer on %s, want %s: %s is tainted, and %s's XID 13 is the application's", newcomer.devices[0], well.Name, sick.Name, well.Name)
	}
	if again := d.checkPod(t, e, "victim", draPodUnits, 1); again.devices[0] != sick.Name {
		t.Errorf("victim now on %v, want still on %s", again.devices, sick.Name)
	}
	d.checkInvariants(t, e, map[string]int64{sick.Name: draPodUnits, well.Name: draPodUnits})
}

// waitTaints waits until the node's published devices carry exactly the driver's NoSchedule
// taints want (device → taint value), the others none.
func (d *draNode) waitTaints(t *testing.T, e *env, want map[string]string) {
	t.Helper()
	key := dra.DefaultDriverName + "/" + dra.TaintUnhealthy
	var got map[string]string
	err := poll(e.ctx, time.Minute, func() (bool, error) {
		devices, err := e.c.DRADevices(e.ctx, framework.RealNodeName)
		if err != nil {
			return false, err
		}
		got = map[string]string{}
		for _, dev := range devices {
			for _, taint := range dev.Taints {
				got[dev.Name] += fmt.Sprintf("%s=%s:%s", taint.Key, taint.Value, taint.Effect)
			}
		}
		for name, value := range want {
			if got[name] != fmt.Sprintf("%s=%s:%s", key, value, resourceapi.DeviceTaintEffectNoSchedule) {
				return false, nil
			}
		}
		return len(got) == len(want), nil
	})
	if err != nil {
		t.Fatalf("device taints %v, want %s=<value>:NoSchedule on %v only: %v", got, key, want, err)
	}
	t.Logf("device taints: %v", got)
}

// startDRANode starts TestDRA's cluster and node: the control plane with the extender serving
// the webhook (--dra-webhook) and kube-scheduler with the shipped configuration, the real node
// on containerd v2 with CDI, DRA mode's manifests (InstallDRA) and share-plugin --mode=dra on
// three mocked cards (startDRADriver). It skips t where a real kubelet cannot run or the
// containerd v2 programs were not built (make e2e-bins builds them).
func startDRANode(t *testing.T) *draNode {
	t.Helper()
	pause := claimCDIRealNode(t)
	dir := artifactDir(t)
	d := &draNode{xids: filepath.Join(dir, "xids"), procs: filepath.Join(dir, "gpu-processes.json"), library: filepath.Join(dir, "hami-core", "libvgpu.so"), stateDir: filepath.Join(dir, "hami-core-state")}
	buildSharedObject(t, d.library)
	t.Cleanup(func() { framework.UnmountUnder(d.stateDir) }) // after the node stops: the claims' tmpfs counter folders
	d.e = newEnv(t, "--dra-webhook")
	e := d.e
	var err error
	if d.node, err = e.c.StartRealNodeWith(e.ctx, pause, framework.RealNodeOptions{ContainerdV2: true}); d.node != nil {
		t.Cleanup(func() { d.node.Stop(e.ctx) }) // before the control plane stops
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.InstallDRA(e.ctx, e.ext.URL()); err != nil {
		t.Fatal(err)
	}
	d.startDRADriver(t)
	return d
}

// startDRADriver starts share-plugin --mode=dra (built with fake NVML) on the node's three
// mocked cards with HAMi-core limits, waits until it publishes them and checks what it
// published, then removes the node's admission taint.
func (d *draNode) startDRADriver(t *testing.T) {
	t.Helper()
	e := d.e
	plugin, err := framework.BuildGpushare(s.root, s.work, "share-plugin", "-tags=fakenvml")
	if err != nil {
		t.Fatal(err)
	}
	err = d.node.StartDRASharePlugin(plugin, "--fake-gpus=dgxa100", fmt.Sprintf("--fake-gpu-count=%d", draCards),
		"--fake-gpu-memory="+draCardMemory, "--fake-gpu-reserved-memory=450Mi", "--fake-gpu-xid-file="+d.xids,
		"--hami-core-install-from=", "--hami-core-library="+d.library, "--hami-core-state-dir="+d.stateDir, "--v=4",
		"--fake-gpu-processes-file="+d.procs, "--usage-period=1s")
	if err != nil {
		t.Fatal(err)
	}
	if d.devices, err = d.node.WaitDRADevices(e.ctx, draCards, 2*time.Minute); err != nil {
		t.Fatalf("the DRA driver never published the node's cards: %v", err)
	}
	checkPublishedCards(t, d.devices)
	if err := e.c.RemoveNotReadyTaint(e.ctx, framework.RealNodeName); err != nil {
		t.Fatal(err)
	}
}
