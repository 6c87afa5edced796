package main

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
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
		if m.MountPath == "/host/proc" && !m.ReadOnly {
			t.Error("the host's /proc is mounted read-write")
		}
	}
	if diff := cmp.Diff([]string{"/var/lib/kubelet/device-plugins", "/var/lib/kubelet/pod-resources", "/host/proc"}, mounts); diff != "" {
		t.Errorf("mounts (-want,+got):\n%s", diff)
	}
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
