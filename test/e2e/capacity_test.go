package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// Card memory of TestCardCapacityAndHealthOnRealKubelet: two mocked 16 GiB cards of which the
// driver reserves 450 MiB (as NVML's nvmlDeviceGetMemoryInfo_v2 reports it) and the operator
// holds back 256 MiB more (--reserve-memory), so 15 units of 1 GiB each, not 16.
const (
	capacityCardBytes     = 16 << 30
	capacityReservedBytes = 450<<20 + 256<<20
	capacityCardUnits     = (capacityCardBytes - capacityReservedBytes) >> 30
)

// TestCardCapacityAndHealthOnRealKubelet runs share-plugin on mocked cards that report a
// driver reserve, with the real kubelet and containerd: the node advertises the reduced units
// to the kubelet (capacity and allocatable 2 x 15, not 2 x 16) and its inventory annotation
// carries each card's total, reserved and usable memory. Then an XID the application caused
// (13) is injected through the mock on one card and a critical one (79) on the other: the
// second card alone goes out, all its units Unhealthy in the kubelet's view (allocatable drops
// by a whole card), healthy false in the annotation, gpushare_card_healthy 0 in the
// extender's metrics, marked in `kubectl inspect gpushare -o wide`, and the pod on it gets a
// Warning event naming the card, the XID and the node; the pod on the other card gets none. The
// invariant check ends it.
func TestCardCapacityAndHealthOnRealKubelet(t *testing.T) {
	xids := filepath.Join(artifactDir(t), "xids")
	e, _, gpus := startRealNodeWith(t, framework.RealNodeOptions{},
		"--fake-gpu-reserved-memory=450Mi", "--reserve-memory=256Mi", "--fake-gpu-xid-file="+xids)
	checkCardMemory(t, gpus)
	e.waitKubeletGPUMem(2*capacityCardUnits, 2*capacityCardUnits)

	// victim fills most of one card, so bystander (binpack would have joined it) takes the other
	units := map[string]int64{"victim": capacityCardUnits - 2, "bystander": 4}
	cards := map[string]int{}
	for _, name := range []string{"victim", "bystander"} {
		e.create(e.realNodePod(name, units[name]))
		e.waitBound(name, time.Minute)
	}
	for _, name := range []string{"victim", "bystander"} {
		pod := e.waitRunning(name, 2*time.Minute)
		idx, err := strconv.Atoi(pod.Annotations[contract.AnnotationIndex])
		if err != nil {
			t.Fatalf("pod %s: GPU index annotation %q: %v", name, pod.Annotations[contract.AnnotationIndex], err)
		}
		cards[name] = idx
	}
	if cards["victim"] == cards["bystander"] {
		t.Fatalf("victim and bystander on one card (%d): %d + %d units of %d", cards["victim"], units["victim"], units["bystander"], capacityCardUnits)
	}
	sick, well := cards["victim"], cards["bystander"]
	appendXIDs(t, xids, fmt.Sprintf("%d 13", well), fmt.Sprintf("%d 79", sick))

	e.waitKubeletGPUMem(2*capacityCardUnits, capacityCardUnits) // the sick card's units all Unhealthy
	e.waitCardHealth(map[int]bool{sick: false, well: true})
	e.waitPodEvent("victim", deviceplugin.ReasonGPUUnhealthy,
		fmt.Sprintf("GPU %d (%s,", sick, uuidOf(t, gpus, sick)), "on node "+framework.RealNodeName, "critical XID 79")
	if evs := e.events("bystander"); strings.Contains(evs, deviceplugin.ReasonGPUUnhealthy) {
		t.Errorf("bystander, on the healthy card, got a %s event:\n%s", deviceplugin.ReasonGPUUnhealthy, evs)
	}
	e.waitCardHealthyMetric(map[int]float64{sick: 0, well: 1})
	e.checkInspectMarks(sick)

	inv, err := e.c.CheckInvariants(e.ctx, "default", e.ext)
	if err != nil {
		t.Fatal(err)
	}
	if !inv.OK() {
		t.Errorf("invariants: %s", inv)
	}
}

// checkCardMemory checks what the annotation says of each card's memory.
func checkCardMemory(t *testing.T, gpus []contract.GPU) {
	t.Helper()
	if len(gpus) != 2 {
		t.Fatalf("%d cards, want 2", len(gpus))
	}
	for _, g := range gpus {
		if g.Units != capacityCardUnits || g.MemoryBytes != capacityCardBytes || g.ReservedBytes != capacityReservedBytes ||
			g.UsableBytes != capacityCardBytes-capacityReservedBytes {
			t.Errorf("GPU %d: %d units, %d total, %d reserved, %d usable bytes; want %d units, %d, %d and %d", g.Index, g.Units,
				g.MemoryBytes, g.ReservedBytes, g.UsableBytes, capacityCardUnits, int64(capacityCardBytes), int64(capacityReservedBytes),
				int64(capacityCardBytes-capacityReservedBytes))
		}
	}
}

// realNodePod is a pod of units gpu-mem for the real node that sleeps.
func (e *env) realNodePod(name string, units int64) *v1.Pod {
	pod := e.gpuPod(name, units)
	pod.Spec.HostNetwork = true
	// no kube-root-ca.crt publisher runs, so no service-account volume can be mounted
	pod.Spec.AutomountServiceAccountToken = new(bool)
	pod.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": framework.RealNodeName}
	c := &pod.Spec.Containers[0]
	c.Image, c.ImagePullPolicy = framework.LocalImage, v1.PullNever
	c.Command = []string{"sh", "-c", "sleep 3600"}
	return pod
}

// appendXIDs appends lines to the share-plugin's fake XID file (--fake-gpu-xid-file).
func appendXIDs(t *testing.T, path string, lines ...string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(strings.Join(lines, "\n") + "\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// waitKubeletGPUMem waits until the kubelet reports the real node's gpu-mem capacity and
// allocatable: the devices it has, and the healthy ones among them.
func (e *env) waitKubeletGPUMem(capacity, allocatable int64) {
	e.t.Helper()
	var got string
	err := poll(e.ctx, 2*time.Minute, func() (bool, error) {
		n, err := e.c.Client.CoreV1().Nodes().Get(e.ctx, framework.RealNodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		c, a := n.Status.Capacity[contract.DefaultResourceName], n.Status.Allocatable[contract.DefaultResourceName]
		got = fmt.Sprintf("capacity %s, allocatable %s", c.String(), a.String())
		return c.Value() == capacity && a.Value() == allocatable, nil
	})
	if err != nil {
		e.t.Fatalf("kubelet never reported %s capacity %d, allocatable %d (last: %s): %v", contract.DefaultResourceName, capacity, allocatable, got, err)
	}
}

// waitCardHealth waits until the real node's annotation gives the cards this health.
func (e *env) waitCardHealth(want map[int]bool) {
	e.t.Helper()
	var last string
	err := poll(e.ctx, time.Minute, func() (bool, error) {
		n, err := e.c.Client.CoreV1().Nodes().Get(e.ctx, framework.RealNodeName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = n.Annotations[contract.DefaultNodeGPUsKey]
		gpus, err := contract.DecodeGPUs(last)
		if err != nil {
			return false, err
		}
		for _, g := range gpus {
			if h, ok := want[g.Index]; ok && h != g.Healthy {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		e.t.Fatalf("cards never had health %v; annotation %s: %v", want, last, err)
	}
}

// waitPodEvent waits until pod has an event of reason whose message says every one of says.
func (e *env) waitPodEvent(pod, reason string, says ...string) {
	e.t.Helper()
	err := poll(e.ctx, time.Minute, func() (bool, error) {
		list, err := e.c.Client.CoreV1().Events("default").List(e.ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod})
		if err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.Reason != reason || ev.Type != v1.EventTypeWarning {
				continue
			}
			all := true
			for _, s := range says {
				all = all && strings.Contains(ev.Message, s)
			}
			if all {
				e.t.Logf("pod %s: %s %s: %s", pod, ev.Type, ev.Reason, ev.Message)
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		e.t.Fatalf("pod %s never got a Warning %s saying %q: %v\nevents:\n%s", pod, reason, says, err, e.events(pod))
	}
}

// waitCardHealthyMetric waits until the extender's gpushare_card_healthy of the real node's
// cards has these values.
func (e *env) waitCardHealthyMetric(want map[int]float64) {
	e.t.Helper()
	var got map[string]float64
	err := poll(e.ctx, time.Minute, func() (bool, error) {
		m, err := e.ext.Metrics(e.ctx)
		if err != nil {
			return false, err
		}
		got = map[string]float64{}
		ok := true
		for card, v := range want {
			key := fmt.Sprintf(`gpushare_card_healthy{card="%d",node="%s"}`, card, framework.RealNodeName)
			have, found := m[key]
			got[key] = have
			ok = ok && found && have == v
		}
		return ok, nil
	})
	if err != nil {
		e.t.Errorf("extender's gpushare_card_healthy never was %v: last %v: %v", want, got, err)
	}
}

// checkInspectMarks checks that `kubectl inspect gpushare -o wide` marks card sick unhealthy
// (in the node table and the card table) and shows each card's total, reserved and usable
// memory.
func (e *env) checkInspectMarks(sick int) {
	e.t.Helper()
	out, err := e.kubectl("inspect", "gpushare", "-o", "wide")
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Logf("kubectl inspect gpushare -o wide:\n%s", out)
	memory := fmt.Sprintf("%dMi %dMi %dMi", capacityCardBytes>>20, capacityReservedBytes>>20, (capacityCardBytes-capacityReservedBytes)>>20)
	health := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) < 9 || f[0] != framework.RealNodeName || !strings.Contains(strings.Join(f, " "), memory) {
			continue
		}
		for i := 2; i+1 < len(f); i++ { // the card table: NODE GPU MODEL (several words) UUID HEALTH ...
			if strings.HasPrefix(f[i], "GPU-") {
				health[f[1]] = f[i+1]
				break
			}
		}
	}
	want := map[string]string{strconv.Itoa(sick): "Unhealthy", strconv.Itoa(1 - sick): "Healthy"}
	if diff := cmp.Diff(want, health); diff != "" || !strings.Contains(out, "(unhealthy)") {
		e.t.Errorf("kubectl inspect gpushare -o wide: want card %d Unhealthy and marked (unhealthy), each card with memory %q; cards by health (-want,+got):\n%s\n%s",
			sick, memory, diff, out)
	}
}
