package main

import (
	"flag"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/internal/charttest"
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
type chartObjects = charttest.Objects

// renderChart renders the chart as release gpushare in namespace ns with the --set values
// sets, and returns its objects, or helm's error output.
func renderChart(t *testing.T, ns string, sets ...string) (chartObjects, error) {
	t.Helper()
	return charttest.Render(t, helmBinary, chartDir, ns, sets...)
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
				if objs.Get(t, m.key, &ds) && runsOn(t, &ds, tt.labels) {
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
