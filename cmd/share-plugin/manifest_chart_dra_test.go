package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// chartDRACase is a render of the chart with DRA mode on, and what its values say.
type chartDRACase struct {
	name         string
	sets         []string
	kubelet      string // sharePlugin.kubeletDir
	cdi          string // dra.cdiRoot
	driver       string // dra.driverName
	order        string // dra.deviceOrder
	counterTmpfs bool   // sharePlugin.memoryLimit.counterSize is not 0
}

// TestChartDRADaemonSet: the chart's DRA driver runs with valid flags, as its values say, at
// the host's paths kubelet and the runtime reach; the device plugin of the same release looks
// for that driver where kubelet registers it; the DeviceClass selects it; its RBAC is
// config/dra's.
func TestChartDRADaemonSet(t *testing.T) {
	tests := []chartDRACase{
		{name: "defaults", kubelet: "/var/lib/kubelet", cdi: "/var/run/cdi", driver: "gpushare.aliyun.com", order: "index", counterTmpfs: true},
		{name: "other paths and names", sets: []string{"sharePlugin.kubeletDir=/data/kubelet", "dra.cdiRoot=/etc/cdi",
			"dra.driverName=gpu.example.com", "dra.deviceOrder=most-allocated"},
			kubelet: "/data/kubelet", cdi: "/etc/cdi", driver: "gpu.example.com", order: "most-allocated", counterTmpfs: true},
		{name: "unbounded counter folders", sets: []string{"sharePlugin.memoryLimit.counterSize=0"},
			kubelet: "/var/lib/kubelet", cdi: "/var/run/cdi", driver: "gpushare.aliyun.com", order: "index"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := mustRender(t, "gpu-system", append(tt.sets, "dra.enabled=true", "dra.webhook.caBundle="+chartCA)...)
			var ds, dp appsv1.DaemonSet
			if !objs.Get(t, "DaemonSet/gpushare-dra-driver", &ds) || !objs.Get(t, "DaemonSet/gpushare-share-plugin", &dp) {
				t.Fatalf("the render lacks a DaemonSet: %v", keys(objs))
			}
			checkChartDRADriver(t, &ds, &tt)
			checkChartDRAPaths(t, &ds, tt.kubelet)
			checkChartDevicePluginProbe(t, &dp, &tt)
			checkChartDRARBAC(t, objs, ds.Spec.Template.Spec.ServiceAccountName, "gpu-system")
			var class resourcev1.DeviceClass
			if !objs.Get(t, "DeviceClass/"+tt.driver, &class) || len(class.Spec.Selectors) != 1 || class.Spec.Selectors[0].CEL == nil ||
				class.Spec.Selectors[0].CEL.Expression != `device.driver == "`+tt.driver+`"` {
				t.Errorf("no DeviceClass %s selecting the driver's devices: %+v", tt.driver, class.Spec)
			}
		})
	}
}

// keys lists the objects of a render.
func keys(objs chartObjects) []string {
	var out []string
	for k := range objs {
		out = append(out, k)
	}
	return out
}

// checkChartDRADriver: the driver's flags parse and validate as the values say, with the
// privilege its counter folders need and no more, one pod per node at a time.
func checkChartDRADriver(t *testing.T, ds *appsv1.DaemonSet, tt *chartDRACase) {
	t.Helper()
	c := ds.Spec.Template.Spec.Containers[0]
	o := parseArgs(t, c.Args)
	o.nodeName = "n1" // NODE_NAME, from the downward API
	if err := o.validate(); err != nil || o.mode != modeDRA {
		t.Fatalf("args %v: mode %s, validate %v; want DRA mode with valid flags", c.Args, o.mode, err)
	}
	if got, want := []string{o.dra.driverName, o.dra.deviceOrder, o.dra.cdiRoot}, []string{tt.driver, tt.order, tt.cdi}; !cmp.Equal(got, want) {
		t.Errorf("driver, order, CDI root %v, want %v", got, want)
	}
	sc := c.SecurityContext
	if privileged := sc != nil && sc.Privileged != nil && *sc.Privileged; privileged != tt.counterTmpfs {
		t.Errorf("privileged %t, want %t (a counter tmpfs needs it, nothing else does)", privileged, tt.counterTmpfs)
	}
	if !tt.counterTmpfs && (sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation) {
		t.Error("unprivileged, the driver must not allow privilege escalation")
	}
	var prop *v1.MountPropagationMode
	for _, m := range c.VolumeMounts {
		if m.MountPath == o.memoryLimit.StateDir {
			prop = m.MountPropagation
		}
	}
	if bidi := prop != nil && *prop == v1.MountPropagationBidirectional; bidi != tt.counterTmpfs {
		t.Errorf("state folder Bidirectional %t, want %t", bidi, tt.counterTmpfs)
	}
	if s := ds.Spec.UpdateStrategy.RollingUpdate; s == nil || s.MaxSurge == nil || s.MaxSurge.IntValue() != 0 {
		t.Error("maxSurge must be 0: kubelet serves one instance of a driver that does not opt into rolling updates")
	}
}

// checkChartDRAPaths: kubelet and the runtime reach what the driver names at the same paths
// on the host, under kubelet's folder; the device plugins' folder it only probes is read-only.
func checkChartDRAPaths(t *testing.T, ds *appsv1.DaemonSet, kubelet string) {
	t.Helper()
	o := parseArgs(t, ds.Spec.Template.Spec.Containers[0].Args)
	cfg := o.draConfig()
	if cfg.PluginsDir != kubelet+"/plugins" || cfg.RegistryDir != kubelet+"/plugins_registry" {
		t.Errorf("plugins %s and registry %s, want under %s", cfg.PluginsDir, cfg.RegistryDir, kubelet)
	}
	for _, dir := range []string{cfg.PluginsDir, cfg.RegistryDir, cfg.CDIRoot, filepath.Dir(cfg.Enforce.Library), cfg.Enforce.StateDir} {
		if got := hostFolder(ds, dir); got != filepath.Clean(dir) {
			t.Errorf("the driver's folder %s is the host's %q", dir, got)
		}
	}
	if got := hostFolder(ds, o.kubeletDir); got != kubelet+"/device-plugins" {
		t.Errorf("the driver probes the device plugin in the host's %q, want %s/device-plugins", got, kubelet)
	}
	// Usage and policing: the host's /proc and PID namespace, the capabilities to read and kill.
	if got := hostFolder(ds, o.hostProc); got != "/proc" || !ds.Spec.Template.Spec.HostPID || o.metricsAddress == "" {
		t.Errorf("--host-proc is the host's %q, hostPID %t, --metrics-address=%q: want the host's /proc and PID namespace and metrics served",
			got, ds.Spec.Template.Spec.HostPID, o.metricsAddress)
	}
	if sc := ds.Spec.Template.Spec.Containers[0].SecurityContext; sc != nil && (sc.Privileged == nil || !*sc.Privileged) &&
		(sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Add, "SYS_PTRACE") || !slices.Contains(sc.Capabilities.Add, "KILL")) {
		t.Errorf("unprivileged without SYS_PTRACE and KILL (%+v): the policing can neither read GPU processes' maps nor kill", sc.Capabilities)
	}
	for _, m := range ds.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.MountPath == filepath.Clean(o.kubeletDir) && !m.ReadOnly {
			t.Error("the device plugins' folder is mounted read-write: the DRA driver only probes it")
		}
	}
}

// checkChartDevicePluginProbe: the release's device plugin looks for the release's DRA driver
// in kubelet's registry, read-only.
func checkChartDevicePluginProbe(t *testing.T, dp *appsv1.DaemonSet, tt *chartDRACase) {
	t.Helper()
	o := parseArgs(t, dp.Spec.Template.Spec.Containers[0].Args)
	if got := hostFolder(dp, o.dra.registryDir); o.dra.driverName != tt.driver || got != tt.kubelet+"/plugins_registry" {
		t.Errorf("the device plugin looks for the driver %q in the host's %q, want %q in %s/plugins_registry", o.dra.driverName, got, tt.driver, tt.kubelet)
	}
	for _, m := range dp.Spec.Template.Spec.Containers[0].VolumeMounts {
		if m.MountPath == filepath.Clean(o.dra.registryDir) && !m.ReadOnly {
			t.Error("kubelet's registry is mounted read-write into the device plugin: it only probes it")
		}
	}
}

// checkChartDRARBAC: the chart binds config/dra's ClusterRole, unchanged, to the driver's
// service account.
func checkChartDRARBAC(t *testing.T, objs chartObjects, account, ns string) {
	t.Helper()
	var role rbacv1.ClusterRole
	var binding rbacv1.ClusterRoleBinding
	if !objs.Get(t, "ServiceAccount/"+account, &v1.ServiceAccount{}) || !objs.Get(t, "ClusterRoleBinding/"+account, &binding) ||
		!objs.Get(t, "ClusterRole/"+binding.RoleRef.Name, &role) {
		t.Fatalf("the render lacks the driver's account %s, its ClusterRoleBinding or ClusterRole: %v", account, keys(objs))
	}
	if diff := cmp.Diff([]rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: ns}}, binding.Subjects); diff != "" {
		t.Errorf("ClusterRoleBinding subjects (-want,+got):\n%s", diff)
	}
	if diff := cmp.Diff(configClusterRole(t, "../../config/dra/rbac.yaml").Rules, role.Rules); diff != "" {
		t.Errorf("ClusterRole rules, against config/dra's (-want,+got):\n%s", diff)
	}
}

// configClusterRole is the ClusterRole of a shipped RBAC file.
func configClusterRole(t *testing.T, path string) rbacv1.ClusterRole {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	for doc := range strings.SplitSeq(string(raw), "\n---\n") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Kind == "ClusterRole" {
			if err := yaml.UnmarshalStrict([]byte(doc), &role); err != nil {
				t.Fatal(err)
			}
		}
	}
	return role
}
