package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	v1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	schedv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/internal/charttest"
	"github.com/gpushare/gpushare/pkg/placement/policies"
	"github.com/gpushare/gpushare/pkg/scheduler"
)

// The Helm chart's extender in DRA mode (charts/gpushare, dra.extender), rendered by the pinned
// helm that `make helm` builds (mk/helm.mk; `make test` builds it in verify-helm before the
// unit tests).

const (
	draChartHelm = "../../bin/tools/helm"
	draChartDir  = "../../charts/gpushare"
	// draChartCA is a dra.webhook.caBundle: the base64 of a PEM certificate.
	draChartCA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUIKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
	// draChartNotes is the ConfigMap into which draChartWithNotes renders NOTES.txt.
	draChartNotes = "ConfigMap/gpushare-notes-under-test"
)

// draChartObjects are a render's objects, each as YAML, by "Kind/name".
type draChartObjects = charttest.Objects

// draChartWithNotes is a chart that renders as charts/gpushare and also as the ConfigMap
// draChartNotes whose notes are NOTES.txt rendered with the same values (helm template leaves
// NOTES.txt out, and helm install --dry-run wants a cluster). The chart's own files are linked,
// not copied, so the render is of the checkout's templates.
func draChartWithNotes(t *testing.T) string {
	t.Helper()
	src, err := filepath.Abs(draChartDir)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "templates" {
			mustSymlink(t, filepath.Join(src, e.Name()), filepath.Join(dir, e.Name()))
		}
	}
	templates, err := os.ReadDir(filepath.Join(src, "templates"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "templates"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, e := range templates {
		mustSymlink(t, filepath.Join(src, "templates", e.Name()), filepath.Join(dir, "templates", e.Name()))
	}
	notes, err := os.ReadFile(filepath.Join(src, "templates", "NOTES.txt"))
	if err != nil {
		t.Fatal(err)
	}
	_, name, _ := strings.Cut(draChartNotes, "/")
	for file, text := range map[string]string{
		"_notes_under_test.tpl": `{{- define "gpushare.notesUnderTest" -}}` + string(notes) + `{{- end -}}`,
		"notes_under_test.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\n" +
			`data: {notes: {{ include "gpushare.notesUnderTest" . | toJson }}}` + "\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, "templates", file), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// mustSymlink links newname to oldname.
func mustSymlink(t *testing.T, oldname, newname string) {
	t.Helper()
	if err := os.Symlink(oldname, newname); err != nil {
		t.Fatal(err)
	}
}

// renderDRAChart renders the chart in dir as release gpushare in namespace ns with the --set
// values sets, and returns its objects, or helm's error output.
func renderDRAChart(t *testing.T, dir, ns string, sets ...string) (draChartObjects, error) {
	t.Helper()
	return charttest.Render(t, draChartHelm, dir, ns, sets...)
}

// TestChartDRAExtender: with dra.enabled and dra.extender the chart's extender runs in DRA mode
// over the chart's driver, with flags that parse and validate; gpushare-scheduler (mode
// second-scheduler) calls it as config/dra/scheduler-config.yaml does, filter and prioritize
// only; in mode kube-scheduler the notes name that file as kube-scheduler's configuration.
// Without dra.extender neither the flags nor that configuration appear, and the second
// scheduler is configured as config/scheduler-config.yaml.
func TestChartDRAExtender(t *testing.T) {
	nodes := []string{"dra.enabled=true", "dra.webhook.caBundle=" + draChartCA}
	on := append([]string{"dra.extender=true"}, nodes...)
	tests := []struct {
		name    string
		ns      string
		sets    []string
		second  bool   // mode second-scheduler
		dra     bool   // the extender in DRA mode
		webhook bool   // the extender serves DRA mode's webhook
		driver  string // dra.driverName, when DRA nodes are on
	}{
		{name: "off: defaults", ns: "kube-system"},
		{name: "off: DRA nodes, kube-scheduler", ns: "kube-system", sets: nodes, driver: "gpushare.aliyun.com", webhook: true},
		{name: "off: DRA nodes, second scheduler", ns: "kube-system", sets: append([]string{"mode=second-scheduler"}, nodes...), second: true,
			driver: "gpushare.aliyun.com", webhook: true},
		{name: "off: DRA nodes of another driver: the webhook's claims ask its class", ns: "kube-system",
			sets: append([]string{"dra.driverName=gpu.example.com"}, nodes...), driver: "gpu.example.com", webhook: true},
		{name: "on: kube-scheduler", ns: "kube-system", sets: on, dra: true, driver: "gpushare.aliyun.com", webhook: true},
		{name: "on: second scheduler", ns: "kube-system", sets: append([]string{"mode=second-scheduler"}, on...), second: true, dra: true,
			driver: "gpushare.aliyun.com", webhook: true},
		{name: "on: second scheduler, another driver, namespace and port, webhook off", ns: "gpu-system", second: true, dra: true, driver: "gpu.example.com",
			sets: []string{"mode=second-scheduler", "dra.enabled=true", "dra.extender=true", "dra.webhook.enabled=false", "dra.driverName=gpu.example.com", "extender.port=8443"}},
		{name: "on: kube-scheduler, another driver", ns: "kube-system", dra: true, driver: "gpu.example.com", webhook: true,
			sets: append([]string{"dra.driverName=gpu.example.com"}, on...)},
	}
	chart := draChartWithNotes(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := renderDRAChart(t, chart, tt.ns, tt.sets...)
			if err != nil {
				t.Fatal(err)
			}
			var ext appsv1.Deployment
			if !objs.Get(t, "Deployment/gpushare-extender", &ext) {
				t.Fatal("no extender Deployment")
			}
			checkChartDRAExtenderArgs(t, ext.Spec.Template.Spec.Containers[0].Args, tt.dra, tt.webhook, tt.driver)
			checkChartDRAModeRBAC(t, objs, ext.Spec.Template.Spec.ServiceAccountName, tt.ns, tt.dra)
			var sched v1.ConfigMap
			has := objs.Get(t, "ConfigMap/gpushare-scheduler-config", &sched)
			if has != tt.second {
				t.Fatalf("second scheduler's configuration rendered %t, want %t", has, tt.second)
			}
			if tt.second {
				checkChartDRASchedulerConfig(t, objs, &sched, tt.ns, tt.dra)
			}
			var notes v1.ConfigMap
			if !objs.Get(t, draChartNotes, &notes) {
				t.Fatal("NOTES.txt not rendered")
			}
			want := map[bool]string{false: "config/scheduler-config.yaml", true: "config/dra/scheduler-config.yaml"}[tt.dra]
			if tt.second {
				want = "" // gpushare-scheduler is configured by the chart
			}
			if got := draChartNotesConfig(t, notes.Data["notes"]); got != want {
				t.Errorf("the notes give kube-scheduler %q as --config, want %q:\n%s", got, want, notes.Data["notes"])
			}
		})
	}
}

// checkChartDRAModeRBAC: in DRA mode the extender's account is bound to config/dra/extender-rbac.yaml's
// rules (the reads of --dra-mode); otherwise no such role is rendered.
func checkChartDRAModeRBAC(t *testing.T, objs draChartObjects, account, ns string, dra bool) {
	t.Helper()
	var binding rbacv1.ClusterRoleBinding
	var role rbacv1.ClusterRole
	has := objs.Get(t, "ClusterRoleBinding/gpushare-extender-dra-mode", &binding)
	if has != dra {
		t.Fatalf("DRA mode's ClusterRoleBinding rendered %t, want %t", has, dra)
	}
	if !dra {
		return
	}
	if !objs.Get(t, "ClusterRole/"+binding.RoleRef.Name, &role) {
		t.Fatalf("no ClusterRole %s for DRA mode's binding", binding.RoleRef.Name)
	}
	if diff := cmp.Diff([]rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: ns}}, binding.Subjects); diff != "" {
		t.Errorf("DRA mode's ClusterRoleBinding subjects (-want,+got):\n%s", diff)
	}
	want := []rbacv1.PolicyRule{{APIGroups: []string{"resource.k8s.io"}, Resources: []string{"resourceslices", "resourceclaims"}, Verbs: []string{"list", "watch"}}}
	if diff := cmp.Diff(want, role.Rules); diff != "" {
		t.Errorf("DRA mode's ClusterRole rules (-want,+got):\n%s", diff)
	}
}

// checkChartDRAExtenderArgs: the extender's args parse with its own flags and validate, in DRA
// mode when dra (else without --dra-mode), serving the webhook when webhook, whose claims ask
// the chart's DeviceClass (named after the driver) and select on the driver's attributes; the
// driver is driver wherever DRA nodes are on ("" when not: no --dra-driver given).
func checkChartDRAExtenderArgs(t *testing.T, args []string, dra, webhook bool, driver string) {
	t.Helper()
	fs := flag.NewFlagSet("extender", flag.ContinueOnError)
	klog.InitFlags(fs)
	reg := policies.NewRegistry()
	cfg := defaultConfig()
	cfg.addFlags(fs, reg)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("args %v do not parse: %v", args, err)
	}
	if fs.NArg() != 0 {
		t.Errorf("args %v leave %v unparsed", args, fs.Args())
	}
	if err := cfg.validate(reg); err != nil {
		t.Fatalf("args %v do not validate: %v", args, err)
	}
	if cfg.draMode != dra {
		t.Errorf("--dra-mode %t, want %t (args %v)", cfg.draMode, dra, args)
	}
	if cfg.draWebhook != webhook {
		t.Errorf("--dra-webhook %t, want %t (args %v)", cfg.draWebhook, webhook, args)
	}
	if driver != "" && cfg.draDriver != driver {
		t.Errorf("--dra-driver %q, want dra.driverName %q", cfg.draDriver, driver)
	}
	if webhook && cfg.draDeviceClass != driver {
		t.Errorf("--dra-device-class %q, want the chart's DeviceClass %q", cfg.draDeviceClass, driver)
	}
	if driver == "" && slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--dra-") }) {
		t.Errorf("args %v name DRA flags without DRA nodes", args)
	}
	if !dra && slices.Contains(args, "--dra-mode") {
		t.Errorf("args %v name DRA mode with dra.extender off", args)
	}
}

// checkChartDRASchedulerConfig: gpushare-scheduler's configuration calls the release's
// extender Service with the client certificate mounted into it, and is otherwise the shipped
// one, config/dra/scheduler-config.yaml when dra (and then exactly one entry, filter and
// prioritize, weight 100, ignorable, neither bind, preempt nor managedResources), else
// config/scheduler-config.yaml.
func checkChartDRASchedulerConfig(t *testing.T, objs draChartObjects, cm *v1.ConfigMap, ns string, dra bool) {
	t.Helper()
	var got schedv1.KubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict([]byte(cm.Data["config.yaml"]), &got); err != nil {
		t.Fatalf("second scheduler's config.yaml: %v", err)
	}
	var svc v1.Service
	if !objs.Get(t, "Service/gpushare-extender", &svc) || len(svc.Spec.Ports) != 1 {
		t.Fatalf("no extender Service with one port: %+v", svc.Spec)
	}
	url := fmt.Sprintf("https://%s.%s.svc:%d%s", svc.Name, ns, svc.Spec.Ports[0].Port, scheduler.Prefix)
	tls := draChartSchedulerTLS(t, objs)
	shipped := map[bool]string{false: "../../config/scheduler-config.yaml", true: "../../config/dra/scheduler-config.yaml"}[dra]
	raw, err := os.ReadFile(shipped)
	if err != nil {
		t.Fatal(err)
	}
	var want schedv1.KubeSchedulerConfiguration
	if err := yaml.UnmarshalStrict(raw, &want); err != nil {
		t.Fatalf("%s: %v", shipped, err)
	}
	for i := range want.Extenders {
		want.Extenders[i].URLPrefix, want.Extenders[i].TLSConfig = url, tls
	}
	if diff := cmp.Diff(want.Extenders, got.Extenders); diff != "" {
		t.Errorf("extenders, against %s's (-want,+got):\n%s", shipped, diff)
	}
	if diff := cmp.Diff(want.PercentageOfNodesToScore, got.PercentageOfNodesToScore); diff != "" {
		t.Errorf("percentageOfNodesToScore, against %s's (-want,+got):\n%s", shipped, diff)
	}
	if !dra {
		return
	}
	shape := []schedv1.Extender{{URLPrefix: url, FilterVerb: "filter", PrioritizeVerb: "prioritize", Weight: 100, EnableHTTPS: true,
		TLSConfig: tls, HTTPTimeout: metav1.Duration{Duration: 5 * time.Second}, NodeCacheCapable: true, Ignorable: true}}
	if diff := cmp.Diff(shape, got.Extenders); diff != "" {
		t.Errorf("extenders in DRA mode (-want,+got):\n%s", diff)
	}
}

// draChartSchedulerTLS is the tlsConfig naming the files of the client certificate Secret
// mounted into gpushare-scheduler.
func draChartSchedulerTLS(t *testing.T, objs draChartObjects) *schedv1.ExtenderTLSConfig {
	t.Helper()
	var sched appsv1.Deployment
	if !objs.Get(t, "Deployment/gpushare-scheduler", &sched) {
		t.Fatal("no gpushare-scheduler Deployment")
	}
	for _, vol := range sched.Spec.Template.Spec.Volumes {
		if vol.Secret == nil || vol.Secret.SecretName != "gpushare-scheduler-client-tls" {
			continue
		}
		for _, m := range sched.Spec.Template.Spec.Containers[0].VolumeMounts {
			if m.Name == vol.Name {
				return &schedv1.ExtenderTLSConfig{CertFile: m.MountPath + "/tls.crt", KeyFile: m.MountPath + "/tls.key", CAFile: m.MountPath + "/ca.crt"}
			}
		}
	}
	t.Fatal("gpushare-scheduler does not mount its client certificate Secret gpushare-scheduler-client-tls")
	return nil
}

// draChartNotesConfig is the file the notes tell the operator to give kube-scheduler as
// --config ("" when they name none); more than one such instruction fails the test.
func draChartNotesConfig(t *testing.T, notes string) string {
	t.Helper()
	const instruction = " as --config"
	switch strings.Count(notes, instruction) {
	case 0:
		return ""
	case 1:
	default:
		t.Fatalf("the notes give kube-scheduler more than one --config:\n%s", notes)
	}
	before, _, _ := strings.Cut(notes, instruction)
	words := strings.Fields(before)
	return words[len(words)-1]
}

// TestChartDRAExtenderNeedsDRANodes: dra.extender without dra.enabled fails the render, saying
// so: the extender's DRA mode would read the slices of a driver no node runs.
func TestChartDRAExtenderNeedsDRANodes(t *testing.T) {
	tests := []struct {
		name string
		sets []string
	}{
		{name: "kube-scheduler", sets: []string{"dra.extender=true"}},
		{name: "second scheduler, DRA off said so", sets: []string{"mode=second-scheduler", "dra.extender=true", "dra.enabled=false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			const want = "dra.extender: needs dra.enabled=true"
			_, err := renderDRAChart(t, draChartDir, "kube-system", tt.sets...)
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("render error %v, want one saying %q", err, want)
			}
		})
	}
}
