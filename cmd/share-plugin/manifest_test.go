package main

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/deviceplugin/usage"
)

func TestDaemonSetManifest(t *testing.T) {
	raw, err := os.ReadFile("../../config/share-plugin/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(raw, &ds); err != nil {
		t.Fatal(err)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	var nodeFrom string
	for _, e := range c.Env {
		if e.Name == "NODE_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			nodeFrom = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if nodeFrom != "spec.nodeName" {
		t.Errorf("NODE_NAME comes from %q, want the downward API spec.nodeName", nodeFrom)
	}
	var mounts []string
	for _, m := range c.VolumeMounts {
		mounts = append(mounts, m.MountPath)
		if (m.MountPath == "/host/proc" || m.MountPath == "/var/lib/kubelet/plugins_registry") && !m.ReadOnly {
			t.Errorf("%s is mounted read-write", m.MountPath)
		}
	}
	if diff := cmp.Diff([]string{"/var/lib/kubelet/device-plugins", "/var/lib/kubelet/pod-resources", "/host/proc",
		"/usr/local/gpushare/hami-core", "/var/lib/gpushare/hami-core", "/var/lib/kubelet/plugins_registry"}, mounts); diff != "" {
		t.Errorf("mounts (-want,+got):\n%s", diff)
	}
	// The shipped DaemonSet holds every container to its ask, with paths the plugin accepts.
	fs := flag.NewFlagSet("share-plugin", flag.ContinueOnError)
	o := newOptions()
	o.addFlags(fs)
	klog.InitFlags(fs)
	if err := fs.Parse(c.Args); err != nil {
		t.Fatalf("the DaemonSet's args do not parse: %v", err)
	}
	if o.memoryLimit.Mode != "hami-core" || deviceplugin.ValidateMemoryLimit(o.memoryLimit) != nil {
		t.Errorf("DaemonSet memory limit %+v: want hami-core with valid paths", o.memoryLimit)
	}
	// The kernel lets the plugin signal containers' processes only from the host's PID namespace.
	if o.limitEscapeAction == usage.EscapeActionKill && !ds.Spec.Template.Spec.HostPID {
		t.Error("the DaemonSet kills the processes of containers that escape their limit, but without hostPID: true it cannot")
	}
	for _, dir := range []string{filepath.Dir(o.memoryLimit.Library), o.memoryLimit.StateDir} {
		if !slices.Contains(mounts, dir) {
			t.Errorf("the plugin cannot see the host folder %s: not mounted", dir)
		}
	}
	// The one-mode guard (dra.CheckNoDRADriver) looks for the DRA driver of config/dra in
	// kubelet's registry: the host's folder, where the flags say.
	if registry := hostFolder(&ds, o.dra.registryDir); registry != "/var/lib/kubelet/plugins_registry" || o.dra.driverName != readDRADriverName(t) {
		t.Errorf("the device plugin looks for the DRA driver %q in %s (host folder %q), want config/dra's in the host's /var/lib/kubelet/plugins_registry",
			o.dra.driverName, o.dra.registryDir, hostFolder(&ds, o.dra.registryDir))
	}
}

// hostFolder is the host path of the hostPath volume the first container of ds mounts at
// path, or "" if none.
func hostFolder(ds *appsv1.DaemonSet, path string) string {
	spec := &ds.Spec.Template.Spec
	for _, m := range spec.Containers[0].VolumeMounts {
		if m.MountPath != filepath.Clean(path) {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.HostPath != nil {
				return v.HostPath.Path
			}
		}
	}
	return ""
}

// readDRADriverName is the driver name config/dra/daemonset.yaml runs the DRA driver with.
func readDRADriverName(t *testing.T) string {
	t.Helper()
	ds := readDaemonSet(t, "../../config/dra/daemonset.yaml")
	return parseArgs(t, ds.Spec.Template.Spec.Containers[0].Args).dra.driverName
}

func TestRBACIsLeastPrivilege(t *testing.T) {
	raw, err := os.ReadFile("../../config/share-plugin/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	for _, doc := range strings.Split(string(raw), "\n---\n") {
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
	got := map[string][]string{}
	for _, r := range role.Rules {
		for _, res := range r.Resources {
			got[res] = r.Verbs
		}
	}
	want := map[string][]string{
		"nodes": {"get", "patch"}, "nodes/status": {"get", "patch"}, "pods": {"get", "list", "watch", "patch"},
		"events": {"create"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ClusterRole rules (-want,+got):\n%s", diff)
	}
}
