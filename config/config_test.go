// Package config_test checks the shipped manifests against the code they configure.
package config_test

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	schedv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/scheduler"
	"github.com/gpushare/gpushare/pkg/sim"
)

func TestSchedulerConfigs(t *testing.T) {
	second, err := os.ReadFile("second-scheduler/second-scheduler.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The second scheduler's configuration is the ConfigMap's config.yaml.
	_, embedded, ok := strings.Cut(string(second), "config.yaml: |\n")
	if !ok {
		t.Fatal("second-scheduler.yaml has no config.yaml")
	}
	embedded, _, _ = strings.Cut(embedded, "\n---")
	read := func(name string) string {
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	gpuPod := v1.ResourceList{v1.ResourceName(contract.DefaultResourceName): resource.MustParse("4")}
	cpuPod := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")}
	// Which verbs kube-scheduler calls for a pod, over every extender entry interested in it
	// (entries without managedResources take every pod), with "!" after a verb whose failure
	// stops the pod (not ignorable; kube-scheduler ignores failed prioritize calls always).
	all := []string{"filter!", "prioritize", "bind!", "preempt"}
	for _, tc := range []struct {
		name          string
		raw           string
		gpuPod, other []string
	}{
		{"default", read("scheduler-config.yaml"), all, []string{"prioritize"}},
		{"gpu-pods-only", read("scheduler-config-gpu-pods-only.yaml"), all, nil},
		{"second", dedent(embedded), all, []string{"prioritize"}},
		// DRA mode: every pod (converted pods ask no extended resource), never stopped by the
		// extender, which neither binds nor preempts.
		{"dra", read("dra/scheduler-config.yaml"), []string{"filter", "prioritize"}, []string{"filter", "prioritize"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cfg schedv1.KubeSchedulerConfiguration
			if err := yaml.UnmarshalStrict([]byte(tc.raw), &cfg); err != nil {
				t.Fatalf("decode: %v", err)
			}
			for _, e := range cfg.Extenders {
				if !strings.HasSuffix(e.URLPrefix, scheduler.Prefix) || !e.NodeCacheCapable {
					t.Errorf("urlPrefix %q, nodeCacheCapable %v", e.URLPrefix, e.NodeCacheCapable)
				}
				// Mutual TLS: the extender requires kube-scheduler's client certificate.
				if tls := e.TLSConfig; !strings.HasPrefix(e.URLPrefix, "https://") || !e.EnableHTTPS || tls == nil ||
					tls.Insecure || tls.CertFile == "" || tls.KeyFile == "" || tls.CAFile == "" {
					t.Errorf("urlPrefix %q, enableHTTPS %v, tlsConfig %+v: want HTTPS with a client certificate and a CA", e.URLPrefix, e.EnableHTTPS, tls)
				}
				for _, r := range e.ManagedResources {
					if r.Name != contract.DefaultResourceName || r.IgnoredByScheduler {
						t.Errorf("managedResources = %+v", e.ManagedResources)
					}
				}
				// The extender's top score must outvote kube-scheduler's own scores: one step of
				// its 0-10 range is weight x 10 points, the in-tree plugins differ by a few
				// hundred at most.
				if e.PrioritizeVerb != "" && e.Weight < 100 {
					t.Errorf("weight %d < 100: kube-scheduler's own scores could overrule the policy", e.Weight)
				}
			}
			// gpushare-sim --production models this sampling.
			if p := cfg.PercentageOfNodesToScore; p == nil || *p != sim.ShippedPercentageOfNodesToScore {
				t.Errorf("percentageOfNodesToScore %v, want %d (sim.ShippedPercentageOfNodesToScore)", p, sim.ShippedPercentageOfNodesToScore)
			}
			if diff := cmp.Diff(tc.gpuPod, verbsFor(cfg.Extenders, gpuPod)); diff != "" {
				t.Errorf("verbs for a pod asking gpu-mem (-want,+got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.other, verbsFor(cfg.Extenders, cpuPod)); diff != "" {
				t.Errorf("verbs for a pod without gpu-mem (-want,+got):\n%s", diff)
			}
		})
	}
}

// verbsFor lists the verbs kube-scheduler calls for a pod with limits, in the order filter,
// prioritize, bind, preempt, as kube-scheduler's HTTPExtender.IsInterested decides (an entry
// without managedResources takes every pod); "!" marks a verb that stops the pod when it fails.
func verbsFor(exts []schedv1.Extender, limits v1.ResourceList) []string {
	var out []string
	for _, verb := range []string{"filter", "prioritize", "bind", "preempt"} {
		for _, e := range exts {
			interested := len(e.ManagedResources) == 0
			for _, r := range e.ManagedResources {
				if _, ok := limits[v1.ResourceName(r.Name)]; ok {
					interested = true
				}
			}
			name := map[string]string{"filter": e.FilterVerb, "prioritize": e.PrioritizeVerb, "bind": e.BindVerb, "preempt": e.PreemptVerb}[verb]
			if !interested || name == "" {
				continue
			}
			if name != verb {
				out = append(out, verb+"="+name)
				continue
			}
			if (verb == "filter" || verb == "bind") && !e.Ignorable {
				name += "!"
			}
			out = append(out, name)
		}
	}
	return out
}

func dedent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "    ")
	}
	return strings.Join(lines, "\n")
}
