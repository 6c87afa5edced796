package main

import (
	"errors"
	"flag"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// The Helm chart's DRA mode (charts/gpushare, dra.*), rendered by the pinned helm that `make
// helm` builds (mk/helm.mk; `make test` builds it in verify-helm before the unit tests).

const (
	helmBinary = "../../bin/tools/helm"
	chartDir   = "../../charts/gpushare"
	// chartCA is a dra.webhook.caBundle: the base64 of a PEM certificate.
	chartCA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
)

// chartObjects are a render's objects, each as YAML, by "Kind/name".
type chartObjects map[string][]byte

// renderChart renders the chart as release gpushare in namespace ns with the --set values
// sets, and returns its objects, or helm's error output.
func renderChart(t *testing.T, ns string, sets ...string) (chartObjects, error) {
	t.Helper()
	if _, err := os.Stat(helmBinary); err != nil {
		t.Fatalf("no helm at %s: run `make helm` (make test builds it first): %v", helmBinary, err)
	}
	args := []string{"template", "gpushare", chartDir, "-n", ns}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := exec.Command(helmBinary, args...).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return nil, errors.New(string(exit.Stderr))
		}
		t.Fatal(err)
	}
	objs := chartObjects{}
	for doc := range strings.SplitSeq(string(out), "\n---\n") {
		var meta struct {
			metav1.TypeMeta `json:",inline"`
			Metadata        metav1.ObjectMeta `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("rendered document %q: %v", doc, err)
		}
		if meta.Kind != "" {
			objs[meta.Kind+"/"+meta.Metadata.Name] = []byte(doc)
		}
	}
	return objs, nil
}

// mustRender is renderChart that fails the test on a render error.
func mustRender(t *testing.T, ns string, sets ...string) chartObjects {
	t.Helper()
	objs, err := renderChart(t, ns, sets...)
	if err != nil {
		t.Fatalf("helm template %v: %v", sets, err)
	}
	return objs
}

// get decodes, strictly, the object key into out; false when the render has none.
func (c chartObjects) get(t *testing.T, key string, out any) bool {
	t.Helper()
	raw, ok := c[key]
	if !ok {
		return false
	}
	if err := yaml.UnmarshalStrict(raw, out); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return true
}

// parseArgs parses a share-plugin container's args as the binary does.
func parseArgs(t *testing.T, args []string) *options {
	t.Helper()
	fs := flag.NewFlagSet("share-plugin", flag.ContinueOnError)
	o := newOptions()
	o.addFlags(fs)
	klog.InitFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("args %v do not parse: %v", args, err)
	}
	return o
}

// TestChartOneModePerNode: on the nodes of sharePlugin.nodeSelector, the chart puts exactly
// one mode on each: with dra.enabled the DRA driver where gpushare.io/mode=dra and the device
// plugin elsewhere; without it, the device plugin everywhere but there.
func TestChartOneModePerNode(t *testing.T) {
	gpu, dra, dp := map[string]string{"gpushare": "true"}, map[string]string{"gpushare": "true", "gpushare.io/mode": "dra"},
		map[string]string{"gpushare": "true", "gpushare.io/mode": "device-plugin"}
	tests := []struct {
		name   string
		sets   []string
		labels map[string]string
		want   []string
	}{
		{name: "DRA on, a GPU node", sets: []string{"dra.enabled=true", "dra.webhook.caBundle=" + chartCA}, labels: gpu, want: []string{modeDevicePlugin}},
		{name: "DRA on, a GPU node in DRA mode", sets: []string{"dra.enabled=true", "dra.webhook.caBundle=" + chartCA}, labels: dra, want: []string{modeDRA}},
		{name: "DRA on, device-plugin mode said so", sets: []string{"dra.enabled=true", "dra.webhook.caBundle=" + chartCA}, labels: dp, want: []string{modeDevicePlugin}},
		{name: "DRA on, a node without shared GPUs", sets: []string{"dra.enabled=true", "dra.webhook.caBundle=" + chartCA}, labels: map[string]string{"gpushare.io/mode": "dra"}},
		{name: "DRA off, a GPU node", labels: gpu, want: []string{modeDevicePlugin}},
		{name: "DRA off, a GPU node in DRA mode (another release's)", labels: dra},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := mustRender(t, "kube-system", tt.sets...)
			var got []string
			for _, m := range []struct{ mode, key string }{{modeDevicePlugin, "DaemonSet/gpushare-share-plugin"}, {modeDRA, "DaemonSet/gpushare-dra-driver"}} {
				var ds appsv1.DaemonSet
				if objs.get(t, m.key, &ds) && runsOn(t, &ds, tt.labels) {
					got = append(got, m.mode)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("modes on the node %v, want %v", got, tt.want)
			}
		})
	}
}

// runsOn reports whether ds places a pod on a node labelled labels.
func runsOn(t *testing.T, ds *appsv1.DaemonSet, labels map[string]string) bool {
	t.Helper()
	pod := &v1.Pod{Spec: ds.Spec.Template.Spec}
	ok, err := nodeaffinity.GetRequiredNodeAffinity(pod).Match(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}})
	if err != nil {
		t.Fatal(err)
	}
	return ok
}
