package draconvert_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
)

// wantClaim is a claim a conversion must make: its pod claim, container and template spec.
type wantClaim struct {
	podClaim, container string
	init                bool
	units               int64
	count               int64
	memory, cores       string
	models              []string // the selector's models
}

// convertCase is a pod Convert must convert, and what it must make of it.
type convertCase struct {
	name      string
	pod       *v1.Pod
	unit      string
	resource  v1.ResourceName
	want      []wantClaim
	templates int // distinct templates
}

func convertCases() []convertCase {
	return []convertCase{
		{
			name: "one card",
			pod:  makePod(app("main", 4, defaulted)),
			want: []wantClaim{{podClaim: "gpushare-0", container: "main", units: 4, count: 1, memory: "4Gi"}},
		},
		{
			name: "two cards: half each on distinct cards",
			pod:  makePod(app("main", 8), annotate(contract.DefaultGPUsPerContainer, "2")),
			want: []wantClaim{{podClaim: "gpushare-0", container: "main", units: 8, count: 2, memory: "4Gi"}},
		},
		{
			name: "compute cap becomes cores",
			pod:  makePod(app("main", 4), annotate(contract.DefaultCoreKey, "30")),
			want: []wantClaim{{podClaim: "gpushare-0", container: "main", units: 4, count: 1, memory: "4Gi", cores: "30"}},
		},
		{
			name: "model list becomes a selector",
			pod:  makePod(app("main", 4), annotate(contract.DefaultModelKey, "A100 | H100")),
			want: []wantClaim{{podClaim: "gpushare-0", container: "main", units: 4, count: 1, memory: "4Gi", models: []string{"A100", "H100"}}},
		},
		{
			name: "init container and app container",
			pod:  makePod(initApp("warm", 2, defaulted), app("main", 6, defaulted)),
			want: []wantClaim{
				{podClaim: "gpushare-init-0", container: "warm", init: true, units: 2, count: 1, memory: "2Gi"},
				{podClaim: "gpushare-0", container: "main", units: 6, count: 1, memory: "6Gi"},
			},
			templates: 2,
		},
		{
			name: "two containers: two claims of one template; a container without gpu-mem untouched",
			pod:  makePod(app("a", 4), app("sidecar", 0), app("b", 4)),
			want: []wantClaim{
				{podClaim: "gpushare-0", container: "a", units: 4, count: 1, memory: "4Gi"},
				{podClaim: "gpushare-2", container: "b", units: 4, count: 1, memory: "4Gi"},
			},
			templates: 1,
		},
		{
			name: "everything at once, in MiB units, with a claim of the pod's own",
			pod: makePod(app("main", 3072), userClaim("mine"), annotate(contract.DefaultGPUsPerContainer, "4"),
				annotate(contract.DefaultCoreKey, "50"), annotate(contract.DefaultModelKey, "H100")),
			unit: "1Mi",
			want: []wantClaim{{podClaim: "gpushare-0", container: "main", units: 3072, count: 4, memory: "768Mi", cores: "50", models: []string{"H100"}}},
		},
		{
			name: "another resource name (a slash to escape in the patch)",
			pod: makePod(func(p *v1.Pod) {
				p.Spec.Containers = []v1.Container{gpuContainer("main", "example.com/vram", 2, defaulted)}
			}),
			resource: "example.com/vram",
			want:     []wantClaim{{podClaim: "gpushare-0", container: "main", units: 2, count: 1, memory: "2Gi"}},
		},
		{
			name: "a pod without annotations",
			pod:  makePod(app("main", 1), func(p *v1.Pod) { p.Annotations = nil }),
			want: []wantClaim{{podClaim: "gpushare-0", container: "main", units: 1, count: 1, memory: "1Gi"}},
		},
	}
}

func TestConvert(t *testing.T) {
	for _, tt := range convertCases() {
		t.Run(tt.name, func(t *testing.T) {
			cfg := draconvert.DefaultConfig(contract.DefaultNames())
			if tt.unit != "" {
				cfg.Names.Unit = resource.MustParse(tt.unit)
			}
			if tt.resource != "" {
				cfg.Names.Resource = tt.resource
			}
			conv, err := draconvert.Convert(tt.pod, &cfg)
			if err != nil {
				t.Fatalf("Convert: %v", err)
			}
			checkClaims(t, conv, tt.want)
			if want := max(tt.templates, 1); len(conv.Templates()) != want {
				t.Errorf("%d distinct templates, want %d", len(conv.Templates()), want)
			}
			got := applyPatch(t, tt.pod, conv.Patch)
			if diff := cmp.Diff(converted(t, tt.pod, cfg.Names.Resource, conv.Claims), got, quantities()); diff != "" {
				t.Errorf("patched pod (-want,+got):\n%s", diff)
			}
		})
	}
}

// checkClaims compares the claims of conv with want, each template spec in full.
func checkClaims(t *testing.T, conv *draconvert.Conversion, want []wantClaim) {
	t.Helper()
	// prefix, memory per card, cards when several, 16 hex digits of the spec's hash
	templateNamePattern := regexp.MustCompile(`^gpushare-[0-9]+[kmgt]i(-x[0-9]+)?-[0-9a-f]{16}$`)
	if len(conv.Claims) != len(want) {
		t.Fatalf("%d claims, want %d: %+v", len(conv.Claims), len(want), conv.Claims)
	}
	for i, w := range want {
		c := conv.Claims[i]
		if c.PodClaimName != w.podClaim || c.Container != w.container || c.Init != w.init || c.Units != w.units {
			t.Errorf("claim %d = {%s %s init=%v units=%d}, want {%s %s init=%v units=%d}",
				i, c.PodClaimName, c.Container, c.Init, c.Units, w.podClaim, w.container, w.init, w.units)
		}
		selector := ""
		if len(w.models) > 0 {
			var err error
			if selector, err = draconvert.ModelSelector(draconvert.DefaultDriver, w.models); err != nil {
				t.Fatal(err)
			}
		}
		if diff := cmp.Diff(wantSpec(w.count, w.memory, w.cores, selector), c.Template.Spec, quantities()); diff != "" {
			t.Errorf("claim %d template spec (-want,+got):\n%s", i, diff)
		}
		if !templateNamePattern.MatchString(c.Template.Name) || !strings.Contains(c.Template.Name, "-"+strings.ToLower(w.memory)) {
			t.Errorf("claim %d template name %q, want gpushare-%s[-x<cards>]-<hash>", i, c.Template.Name, strings.ToLower(w.memory))
		}
	}
}

// TestConvertTemplateNames: the name follows the spec: equal asks share a name, any
// difference in the spec gives another.
func TestConvertTemplateNames(t *testing.T) {
	cfg := draconvert.DefaultConfig(contract.DefaultNames())
	name := func(p *v1.Pod) string {
		t.Helper()
		conv, err := draconvert.Convert(p, &cfg)
		if err != nil {
			t.Fatal(err)
		}
		return conv.Claims[0].Template.Name
	}
	base := name(makePod(app("main", 4)))
	if again := name(makePod(app("other", 4, defaulted), label("x", "y"))); again != base {
		t.Errorf("same ask, names %q and %q", base, again)
	}
	others := map[string]*v1.Pod{
		"units":  makePod(app("main", 5)),
		"cards":  makePod(app("main", 4), annotate(contract.DefaultGPUsPerContainer, "2")),
		"cores":  makePod(app("main", 4), annotate(contract.DefaultCoreKey, "10")),
		"models": makePod(app("main", 4), annotate(contract.DefaultModelKey, "T4")),
	}
	seen := map[string]string{base: "base"}
	for what, p := range others {
		n := name(p)
		if prev, dup := seen[n]; dup {
			t.Errorf("%s and %s share template name %q", what, prev, n)
		}
		seen[n] = what
	}
}

func TestConvertNothingAsked(t *testing.T) {
	cfg := draconvert.DefaultConfig(contract.DefaultNames())
	// A bad annotation on a pod that asks no gpu-mem is not this webhook's business.
	conv, err := draconvert.Convert(makePod(app("main", 0), annotate(contract.DefaultGPUsPerContainer, "x")), &cfg)
	if err != nil || len(conv.Claims) != 0 || conv.Patch != nil {
		t.Errorf("Convert = %+v, %v; want nothing to convert", conv, err)
	}
}

func TestConvertRefuses(t *testing.T) {
	tests := []struct {
		name    string
		pod     *v1.Pod
		want    error
		message string
	}{
		{"not split evenly", makePod(app("main", 4), annotate(contract.DefaultGPUsPerContainer, "3")), contract.ErrInvalidRequest, "split evenly over 3 GPUs"},
		{"requests differ from limits", makePod(app("main", 4, requests(2))), contract.ErrInvalidRequest, "differs from limits"},
		{"requests without limits", makePod(func(p *v1.Pod) {
			p.Spec.Containers = []v1.Container{{Name: "main", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{contract.DefaultResourceName: resource.MustParse("4")}}}}
		}), contract.ErrInvalidRequest, "without limits"},
		{"10G written for 10 units", makePod(app("main", 10_000_000_000)), contract.ErrInvalidRequest, "not 10G"},
		{"more than any card holds", makePod(app("main", 2048)), draconvert.ErrNotExpressible, "more than the 1024 GiB"},
		{"more cards than a claim holds", makePod(app("main", 40), annotate(contract.DefaultGPUsPerContainer, "40")), draconvert.ErrNotExpressible, "at most 32 devices"},
		{"bad compute cap", makePod(app("main", 4), annotate(contract.DefaultCoreKey, "0")), contract.ErrInvalidRequest, contract.DefaultCoreKey},
		{"model list without a model", makePod(app("main", 4), annotate(contract.DefaultModelKey, "--")), draconvert.ErrNotExpressible, "names no model"},
		{"node named", makePod(app("main", 4), func(p *v1.Pod) { p.Spec.NodeName = "n1" }), draconvert.ErrNotExpressible, "spec.nodeName"},
		{"placement annotation", makePod(app("main", 4), annotate(contract.AnnotationIndex, "0")), draconvert.ErrNotExpressible, contract.AnnotationIndex},
		{"preemption hold", makePod(app("main", 4), annotate(contract.DefaultPreemptionKey, "x")), draconvert.ErrNotExpressible, contract.DefaultPreemptionKey},
		{"claim of the same name", makePod(app("main", 4), userClaim("gpushare-0")), draconvert.ErrNotExpressible, `claim named "gpushare-0"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := draconvert.DefaultConfig(contract.DefaultNames())
			conv, err := draconvert.Convert(tt.pod, &cfg)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Convert = %+v, %v; want an error wrapping %v", conv, err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.message) {
				t.Errorf("message %q does not say %q", err, tt.message)
			}
			// An ask DRA cannot express runs as written on a device-plugin node; an invalid
			// one runs nowhere.
			hint := "label it gpushare.io/mode=device-plugin"
			if strings.Contains(err.Error(), hint) != errors.Is(err, draconvert.ErrNotExpressible) {
				t.Errorf("message %q: the opt-out hint belongs to asks DRA cannot express only", err)
			}
		})
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name  string
		edit  func(*draconvert.Config)
		valid bool
	}{
		{"default", func(*draconvert.Config) {}, true},
		{"no driver", func(c *draconvert.Config) { c.Driver = "" }, false},
		{"device class not a DNS subdomain", func(c *draconvert.Config) { c.DeviceClass = "GPU_share" }, false},
		{"bad names", func(c *draconvert.Config) { c.Names.Unit = resource.MustParse("1Ki") }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := draconvert.DefaultConfig(contract.DefaultNames())
			tt.edit(&cfg)
			if err := cfg.Validate(); (err == nil) != tt.valid || (err != nil && !errors.Is(err, draconvert.ErrInvalidConfig)) {
				t.Errorf("Validate() = %v, want valid %v", err, tt.valid)
			}
		})
	}
}
