package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/pkg/deviceplugin/usage"
	"github.com/gpushare/gpushare/pkg/enforce"
)

// readDaemonSet reads a shipped DaemonSet.
func readDaemonSet(t *testing.T, path string) appsv1.DaemonSet {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(raw, &ds); err != nil {
		t.Fatal(err)
	}
	return ds
}

// TestOneModePerNode: on the nodes that share GPUs (gpushare=true), the shipped DaemonSets put
// exactly one mode on each: the DRA driver where gpushare.io/mode=dra, the device plugin
// everywhere else.
func TestOneModePerNode(t *testing.T) {
	dp := readDaemonSet(t, "../../config/share-plugin/daemonset.yaml")
	dra := readDaemonSet(t, "../../config/dra/daemonset.yaml")
	runs := func(ds appsv1.DaemonSet, labels map[string]string) bool {
		pod := &v1.Pod{Spec: ds.Spec.Template.Spec}
		ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	tests := []struct {
		name   string
		labels map[string]string
		want   string // "device-plugin", "dra" or "" (neither)
	}{
		{name: "a GPU node", labels: map[string]string{"gpushare": "true"}, want: modeDevicePlugin},
		{name: "a GPU node in DRA mode", labels: map[string]string{"gpushare": "true", "gpushare.io/mode": "dra"}, want: modeDRA},
		{name: "a GPU node in device-plugin mode, said so", labels: map[string]string{"gpushare": "true", "gpushare.io/mode": "device-plugin"}, want: modeDevicePlugin},
		{name: "a node without shared GPUs", labels: map[string]string{"gpushare.io/mode": "dra"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			if runs(dp, tt.labels) {
				got = append(got, modeDevicePlugin)
			}
			if runs(dra, tt.labels) {
				got = append(got, modeDRA)
			}
			if strings.Join(got, ",") != tt.want {
				t.Errorf("modes on the node %v, want %q", got, tt.want)
			}
		})
	}
}

func TestDRADaemonSetManifest(t *testing.T) {
	ds := readDaemonSet(t, "../../config/dra/daemonset.yaml")
	c := ds.Spec.Template.Spec.Containers[0]
	fs := flag.NewFlagSet("share-plugin", flag.ContinueOnError)
	o := newOptions()
	o.addFlags(fs)
	klog.InitFlags(fs)
	if err := fs.Parse(c.Args); err != nil {
		t.Fatalf("the DaemonSet's args do not parse: %v", err)
	}
	o.nodeName = "n1" // NODE_NAME, from the downward API
	if err := o.validate(); err != nil || o.mode != modeDRA || o.memoryLimit.Mode != enforce.ModeHAMiCore {
		t.Fatalf("args %v: mode %s, memory limit %s, validate %v; want DRA mode with HAMi-core and valid flags", c.Args, o.mode, o.memoryLimit.Mode, err)
	}
	if s := ds.Spec.UpdateStrategy.RollingUpdate; s == nil || s.MaxSurge == nil || s.MaxSurge.IntValue() != 0 {
		t.Error("maxSurge must be 0: kubelet serves one instance of a driver that does not opt into rolling updates")
	}
	mounts := map[string]v1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	cfg := o.draConfig()
	// kubelet and the runtime reach what the driver names at the same paths on the host.
	hostPaths := map[string]string{}
	for _, v := range ds.Spec.Template.Spec.Volumes {
		hostPaths[v.Name] = v.HostPath.Path
	}
	for _, dir := range []string{cfg.PluginsDir, cfg.RegistryDir, cfg.CDIRoot, o.kubeletDir, filepath.Dir(cfg.Enforce.Library), cfg.Enforce.StateDir} {
		m, ok := mounts[filepath.Clean(dir)]
		if !ok || hostPaths[m.Name] != m.MountPath {
			t.Errorf("the driver's folder %s is not the host's (mount %+v)", dir, m)
		}
	}
	if !mounts[filepath.Clean(o.kubeletDir)].ReadOnly {
		t.Error("the device plugins' folder is mounted read-write: the DRA driver only probes it")
	}
	if p := mounts[cfg.Enforce.StateDir].MountPropagation; p == nil || *p != v1.MountPropagationBidirectional {
		t.Error("the HAMi-core state folder must be Bidirectional: the counter tmpfs mounts must reach the host")
	}
	// Usage and policing: the host's /proc, read-only, and its PID namespace to kill in it.
	if m, ok := mounts[filepath.Clean(o.hostProc)]; !ok || hostPaths[m.Name] != "/proc" || !m.ReadOnly {
		t.Errorf("--host-proc=%s is not the host's /proc mounted read-only (mount %+v)", o.hostProc, m)
	}
	if !ds.Spec.Template.Spec.HostPID || o.limitEscapeAction != usage.EscapeActionKill || o.metricsAddress == "" {
		t.Errorf("hostPID %v, --limit-escape-action=%s, --metrics-address=%q: want the host's PID namespace, kill and metrics served",
			ds.Spec.Template.Spec.HostPID, o.limitEscapeAction, o.metricsAddress)
	}
}

func TestDRARBACIsLeastPrivilege(t *testing.T) {
	raw, err := os.ReadFile("../../config/dra/rbac.yaml")
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
			got[strings.Join(r.APIGroups, ",")+"/"+res] = r.Verbs
		}
	}
	want := map[string][]string{
		"resource.k8s.io/resourceslices": {"list", "watch", "create", "update", "delete"}, "resource.k8s.io/resourceclaims": {"get"},
		"/nodes": {"get"}, "/events": {"create"}, "/pods": {"list", "watch"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ClusterRole rules (-want,+got):\n%s", diff)
	}
}
