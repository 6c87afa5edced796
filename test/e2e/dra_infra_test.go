package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/test/e2e/framework"
)

// The fake DRA driver of TestDRARealNodeContainerdCDI, its device class and its CDI device.
const (
	fakeDRADriver  = "e2e.gpushare.io"
	fakeDRAClass   = "e2e-fake"
	fakeCDIKind    = "e2e.gpushare.io/fake"
	fakeCDIDevice  = "dev0"
	fakeCDIEnv     = "GPUSHARE_E2E_CDI"
	fakeCDIMount   = "/cdi/marker"
	fakeCDIMarker  = "MARKER"
	fakeDRARequest = "dev"
)

// TestDRARealNodeContainerdCDI proves the real node the DRA tests run on: kube-apiserver,
// kube-scheduler and kube-controller-manager v1.37.1 with their default feature gates, a real
// kubelet on containerd v2 with CDI, and a minimal DRA driver (framework.FakeDRADriver) that
// publishes one device and prepares claims by naming a CDI device whose static spec adds an
// environment variable and bind-mounts a host file. A pod asking for the device through a
// ResourceClaimTemplate must run with both (kubectl logs, kubectl exec); deleting it must have
// the kubelet unprepare its claim.
//
// It ends without the invariant check of the gpu-mem tests (Cluster.CheckInvariants): that
// reads gpu-mem placements, and this node has neither gpu-mem nor memory capacity on its
// device, so the check could only pass.
func TestDRARealNodeContainerdCDI(t *testing.T) {
	e, node, driver := startCDIRealNode(t)
	marker := writeFakeCDISpec(t, e, node)
	createFakeDRAClass(t, e)
	name := "cdi-pod"
	e.create(cdiPod(name))
	pod := e.waitRunning(name, 2*time.Minute)

	got := podLogVars(t, e, name)
	t.Logf("pod %s printed %v", name, got)
	want := map[string]string{fakeCDIEnv: fakeCDIDevice, fakeCDIMarker: marker}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("pod %s printed %s=%q, want %q (all: %v)", name, k, got[k], v, got)
		}
	}
	out, err := e.kubectl("exec", name, "--", "cat", fakeCDIMount)
	if err != nil || strings.TrimSpace(out) != marker {
		t.Errorf("kubectl exec cat %s = %q, %v; want %q", fakeCDIMount, out, err, marker)
	}

	claim := podClaim(t, e, pod)
	checkAllocation(t, claim)
	if !slices.Contains(driver.Prepared(), claim.UID) {
		t.Errorf("driver prepared %v, want claim %s (%s) among them", driver.Prepared(), claim.Name, claim.UID)
	}
	if err := e.c.Client.CoreV1().Pods("default").Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete pod %s: %v", name, err)
	}
	err = poll(e.ctx, time.Minute, func() (bool, error) {
		return slices.Contains(driver.Unprepared(), claim.UID), nil
	})
	if err != nil {
		t.Errorf("kubelet never unprepared claim %s after its pod was deleted (unprepared %v): %v", claim.Name, driver.Unprepared(), err)
	}
}

// claimCDIRealNode claims the machine's real node for t (claimRealNode) and returns our pause
// program, built; it skips t where the containerd v2 programs were not built (make e2e-bins
// builds them).
func claimCDIRealNode(t *testing.T) (pause string) {
	t.Helper()
	claimRealNode(t)
	if m := framework.MissingContainerdV2(s.bin); len(m) > 0 {
		t.Skip("\n" + banner + "\nSKIP " + t.Name() + ": containerd v2 missing from " + s.bin + " (make e2e-bins builds it): " +
			strings.Join(m, ", ") + "\n" + banner)
	}
	pause = filepath.Join(s.work, "pause")
	if err := goBuild(pause, "./cmd/pause"); err != nil {
		t.Fatal(err)
	}
	return pause
}

// startCDIRealNode starts the control plane (with kube-controller-manager, our extender and
// kube-scheduler), a real kubelet on containerd v2 with CDI (node "localhost", its admission
// taint removed) and the fake DRA driver with one device. It skips t where a real kubelet
// cannot run or the containerd v2 programs were not built (make e2e-bins builds them).
func startCDIRealNode(t *testing.T) (*env, *framework.RealNode, *framework.FakeDRADriver) {
	t.Helper()
	pause := claimCDIRealNode(t)
	e := newEnv(t)
	var stops []func() // newest last: the node before the driver, which must unprepare its pods' claims
	t.Cleanup(func() {
		for _, stop := range stops {
			stop()
		}
	})
	node, err := e.c.StartRealNodeWith(e.ctx, pause, framework.RealNodeOptions{ContainerdV2: true})
	stops = append(stops, func() { node.Stop(e.ctx) })
	if err != nil {
		t.Fatal(err)
	}
	driver, err := node.StartFakeDRADriver(e.ctx, fakeDRADriver, fakeCDIKind, fakeCDIDevice)
	if err != nil {
		t.Fatal(err)
	}
	stops = append(stops, driver.Stop)
	if err := e.c.RemoveNotReadyTaint(e.ctx, framework.RealNodeName); err != nil {
		t.Fatal(err)
	}
	return e, node, driver
}

// writeFakeCDISpec writes a host file holding a random marker and the CDI spec of the fake
// device: an environment variable naming the device and that file, bind-mounted read-only.
// It returns the marker.
func writeFakeCDISpec(t *testing.T, e *env, node *framework.RealNode) string {
	t.Helper()
	raw := make([]byte, 8)
	_, _ = rand.Read(raw) // never fails (Go 1.24+)
	marker := "cdi-" + hex.EncodeToString(raw)
	host := filepath.Join(e.c.Dir, "cdi-host", "marker")
	if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(host, []byte(marker+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	spec := framework.CDISpec{Version: "0.6.0", Kind: fakeCDIKind, Devices: []framework.CDIDevice{{
		Name: fakeCDIDevice,
		ContainerEdits: framework.CDIEdits{
			Env:    []string{fakeCDIEnv + "=" + fakeCDIDevice},
			Mounts: []framework.CDIMount{{HostPath: host, ContainerPath: fakeCDIMount, Options: []string{"ro", "bind"}}},
		},
	}}}
	if err := node.WriteCDISpec("e2e-fake.json", spec); err != nil {
		t.Fatal(err)
	}
	return marker
}

// createFakeDRAClass creates the DeviceClass of the fake driver's devices and the
// ResourceClaimTemplate asking for one of them.
func createFakeDRAClass(t *testing.T, e *env) {
	t.Helper()
	class := &resourceapi.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: fakeDRAClass},
		Spec: resourceapi.DeviceClassSpec{Selectors: []resourceapi.DeviceSelector{{
			CEL: &resourceapi.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", fakeDRADriver)},
		}}},
	}
	if _, err := e.c.Client.ResourceV1().DeviceClasses().Create(e.ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create DeviceClass: %v", err)
	}
	tmpl := &resourceapi.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: fakeDRAClass, Namespace: "default"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{
			Devices: resourceapi.DeviceClaim{Requests: []resourceapi.DeviceRequest{{
				Name: fakeDRARequest, Exactly: &resourceapi.ExactDeviceRequest{DeviceClassName: fakeDRAClass},
			}}},
		}},
	}
	if _, err := e.c.Client.ResourceV1().ResourceClaimTemplates("default").Create(e.ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ResourceClaimTemplate: %v", err)
	}
}

// cdiPod is a hostNetwork pod on the real node whose container claims a fake device through
// the template and prints the CDI variable and the mounted file.
func cdiPod(name string) *v1.Pod {
	script := fmt.Sprintf("echo %s=$%s; echo %s=$(cat %s); sleep 3600", fakeCDIEnv, fakeCDIEnv, fakeCDIMarker, fakeCDIMount)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.PodSpec{
			HostNetwork:                   true,
			AutomountServiceAccountToken:  new(bool),
			TerminationGracePeriodSeconds: new(int64),
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": framework.RealNodeName},
			ResourceClaims:                []v1.PodResourceClaim{{Name: "fake", ResourceClaimTemplateName: new(fakeDRAClass)}},
			Containers: []v1.Container{{
				Name: "main", Image: framework.LocalImage, ImagePullPolicy: v1.PullNever,
				Command:   []string{"sh", "-c", script},
				Resources: v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "fake"}}},
			}},
		},
	}
}

// podLogVars reads the NAME=value lines the pod printed, through kubectl logs.
func podLogVars(t *testing.T, e *env, name string) map[string]string {
	t.Helper()
	vars, err := e.logVars(name, func(vars map[string]string) bool { _, done := vars[fakeCDIMarker]; return done })
	if err != nil {
		t.Fatalf("pod %s printed nothing: %v", name, err)
	}
	return vars
}

// podClaim returns the ResourceClaim the resource claim controller made for the pod.
func podClaim(t *testing.T, e *env, pod *v1.Pod) *resourceapi.ResourceClaim {
	t.Helper()
	if len(pod.Status.ResourceClaimStatuses) != 1 || pod.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("pod %s claim statuses %+v, want one claim", pod.Name, pod.Status.ResourceClaimStatuses)
	}
	name := *pod.Status.ResourceClaimStatuses[0].ResourceClaimName
	claim, err := e.c.Client.ResourceV1().ResourceClaims(pod.Namespace).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("claim %s of pod %s: %v", name, pod.Name, err)
	}
	return claim
}

// checkAllocation checks that kube-scheduler allocated the claim the fake device of the node's
// pool, and reserved it for one pod.
func checkAllocation(t *testing.T, claim *resourceapi.ResourceClaim) {
	t.Helper()
	if claim.Status.Allocation == nil {
		t.Fatalf("claim %s not allocated", claim.Name)
	}
	want := []resourceapi.DeviceRequestAllocationResult{{Request: fakeDRARequest, Driver: fakeDRADriver, Pool: framework.RealNodeName, Device: fakeCDIDevice}}
	var got []resourceapi.DeviceRequestAllocationResult
	for _, r := range claim.Status.Allocation.Devices.Results {
		got = append(got, resourceapi.DeviceRequestAllocationResult{Request: r.Request, Driver: r.Driver, Pool: r.Pool, Device: r.Device})
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("claim %s allocation (-want,+got):\n%s", claim.Name, diff)
	}
	if len(claim.Status.ReservedFor) != 1 {
		t.Errorf("claim %s reserved for %+v, want one pod", claim.Name, claim.Status.ReservedFor)
	}
}
