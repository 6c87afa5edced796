package main

import (
	"flag"
	"os"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// TestDaemonSetCounterTmpfs: the shipped DaemonSet bounds each container's counter folder with
// a tmpfs, so the plugin can mount one and the mount reaches the host: privileged, with the
// state folder mounted Bidirectional (Kubernetes refuses that propagation otherwise). The Helm
// chart's template says the same, behind memoryLimit.counterSize.
func TestDaemonSetCounterTmpfs(t *testing.T) {
	raw, err := os.ReadFile("../../config/share-plugin/daemonset.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var ds appsv1.DaemonSet
	if err := yaml.UnmarshalStrict(raw, &ds); err != nil {
		t.Fatal(err)
	}
	c := ds.Spec.Template.Spec.Containers[0]
	fs := flag.NewFlagSet("share-plugin", flag.ContinueOnError)
	o := newOptions()
	o.addFlags(fs)
	klog.InitFlags(fs)
	if err := fs.Parse(c.Args); err != nil {
		t.Fatalf("the DaemonSet's args do not parse: %v", err)
	}
	if o.memoryLimit.CounterSize <= 0 {
		t.Fatalf("the DaemonSet's counter folders are unbounded (--hami-core-counter-size=%d)", o.memoryLimit.CounterSize)
	}
	sc := c.SecurityContext
	if sc == nil || sc.Privileged == nil || !*sc.Privileged {
		t.Error("the share-plugin container is not privileged: it cannot mount the counter tmpfs, nor mount its state folder Bidirectional")
	}
	if sc != nil && sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation: false with privileged: true is refused by the API server")
	}
	var prop *v1.MountPropagationMode
	for _, m := range c.VolumeMounts {
		if m.MountPath == o.memoryLimit.StateDir {
			prop = m.MountPropagation
		}
	}
	if prop == nil || *prop != v1.MountPropagationBidirectional {
		t.Errorf("the state folder %s is mounted with propagation %v, want Bidirectional", o.memoryLimit.StateDir, prop)
	}
	chart, err := os.ReadFile("../../charts/gpushare/templates/share-plugin.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--hami-core-counter-size={{ $v.memoryLimit.counterSize }}", "privileged: true", "mountPropagation: Bidirectional"} {
		if !strings.Contains(string(chart), want) {
			t.Errorf("the Helm chart's share-plugin template lacks %q", want)
		}
	}
}
