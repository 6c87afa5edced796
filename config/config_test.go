// Package config_test checks the shipped manifests against the code they configure.
package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	schedv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/scheduler"
)

func TestSchedulerConfigs(t *testing.T) {
	second, err := os.ReadFile("extender/second-scheduler.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The second scheduler's configuration is the ConfigMap's config.yaml.
	_, embedded, ok := strings.Cut(string(second), "config.yaml: |\n")
	if !ok {
		t.Fatal("second-scheduler.yaml has no config.yaml")
	}
	embedded, _, _ = strings.Cut(embedded, "\n---")
	main, err := os.ReadFile("scheduler-config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	allPods, err := os.ReadFile("scheduler-config-all-pods.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// managed: only pods asking gpu-mem reach the extender.
	for _, tc := range []struct {
		name    string
		raw     string
		managed bool
	}{{"default", string(main), true}, {"all-pods", string(allPods), false}, {"second", dedent(embedded), false}} {
		t.Run(tc.name, func(t *testing.T) {
			raw := tc.raw
			var cfg schedv1.KubeSchedulerConfiguration
			if err := yaml.UnmarshalStrict([]byte(raw), &cfg); err != nil {
				t.Fatalf("decode: %v", err)
			}
			if len(cfg.Extenders) != 1 {
				t.Fatalf("%d extenders, want 1", len(cfg.Extenders))
			}
			e := cfg.Extenders[0]
			got := []string{e.FilterVerb, e.PrioritizeVerb, e.BindVerb, e.PreemptVerb}
			if diff := cmp.Diff([]string{"filter", "prioritize", "bind", "preempt"}, got); diff != "" {
				t.Errorf("verbs (-want,+got):\n%s", diff)
			}
			if !strings.HasSuffix(e.URLPrefix, scheduler.Prefix) || !e.NodeCacheCapable || e.Ignorable {
				t.Errorf("urlPrefix %q, nodeCacheCapable %v, ignorable %v", e.URLPrefix, e.NodeCacheCapable, e.Ignorable)
			}
			// The extender's top score must outvote kube-scheduler's own scores: one step of its
			// 0-10 range is weight x 10 points, the in-tree plugins differ by a few hundred at most.
			if e.Weight < 100 {
				t.Errorf("weight %d < 100: kube-scheduler's own scores could overrule the policy", e.Weight)
			}
			switch {
			case !tc.managed && len(e.ManagedResources) != 0:
				t.Errorf("managedResources = %+v, want none (every pod to the extender)", e.ManagedResources)
			case tc.managed && (len(e.ManagedResources) != 1 || e.ManagedResources[0].Name != contract.DefaultResourceName || e.ManagedResources[0].IgnoredByScheduler):
				t.Errorf("managedResources = %+v", e.ManagedResources)
			}
		})
	}
}

func dedent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "    ")
	}
	return strings.Join(lines, "\n")
}
