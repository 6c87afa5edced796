package draconvert_test

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"unicode"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apiserver/pkg/cel/environment"
	dracel "k8s.io/dynamic-resource-allocation/cel"
	"k8s.io/utils/ptr"

	"github.com/gpushare/gpushare/pkg/draconvert"
	"github.com/gpushare/gpushare/pkg/gpumem"
)

// The model selector is proven, not assumed: it is compiled as kube-apiserver validates a
// claim's selectors and evaluated as kube-scheduler's allocator evaluates them
// (k8s.io/dynamic-resource-allocation/cel), against gpumem's own matcher on the same cards.

// celEnvs are the environments a selector must compile and run in: as the API server checks a
// new claim (NewExpressions) and as the allocator runs a stored one (StoredExpressions), with
// the gates of v1.37 (consumable capacity on) and with list-type attributes on too.
func celEnvs() []struct {
	name     string
	features dracel.Features
	env      environment.Type
} {
	return []struct {
		name     string
		features dracel.Features
		env      environment.Type
	}{
		{"new", dracel.Features{EnableConsumableCapacity: true}, environment.NewExpressions},
		{"stored", dracel.Features{EnableConsumableCapacity: true}, environment.StoredExpressions},
		{"new+list-attributes", dracel.Features{EnableConsumableCapacity: true, EnableListTypeAttributes: true}, environment.NewExpressions},
	}
}

// compiled is a selector compiled in every environment of celEnvs.
type compiled []dracel.CompilationResult

// compileSelector compiles expr as the API server does, failing the test where the API server
// would refuse it (a compile error, or an estimated cost above the limit).
func compileSelector(t testing.TB, expr string) compiled {
	t.Helper()
	var out compiled
	for _, e := range celEnvs() {
		r := dracel.GetCompiler(e.features).CompileCELExpression(expr, dracel.Options{EnvType: &e.env})
		if r.Error != nil {
			t.Fatalf("%s: selector %q does not compile: %v", e.name, expr, r.Error)
		}
		if r.MaxCost > resourcev1.CELSelectorExpressionMaxCost {
			t.Fatalf("%s: selector %q costs %d, above the API server's limit %d", e.name, expr, r.MaxCost, resourcev1.CELSelectorExpressionMaxCost)
		}
		out = append(out, r)
	}
	return out
}

// card is a device of the gpushare driver as pkg/dra publishes it; model nil leaves the model
// attribute out.
func card(model *string) dracel.Device {
	attrs := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
		draconvert.AttributeUUID: {StringValue: ptr.To("GPU-0a1b2c3d")},
		"index":                  {IntValue: ptr.To[int64](0)},
	}
	if model != nil {
		attrs[draconvert.AttributeModel] = resourcev1.DeviceAttribute{StringValue: model}
	}
	return dracel.Device{Driver: draconvert.DefaultDriver, AllowMultipleAllocations: ptr.To(true), Attributes: attrs}
}

// accepts evaluates the selector on dev in every environment; they must agree.
func (c compiled) accepts(t testing.TB, dev dracel.Device) bool {
	t.Helper()
	var first bool
	for i, r := range c {
		got, _, err := r.DeviceMatches(t.Context(), dev)
		if err != nil {
			t.Fatalf("selector %q on %+v: %v (an error aborts the allocation)", r.Expression, dev.Attributes, err)
		}
		if i == 0 {
			first = got
		} else if got != first {
			t.Fatalf("selector %q on %+v: environments disagree", r.Expression, dev.Attributes)
		}
	}
	return first
}

// gpumemAccepts is gpumem's verdict: what the extender decides in the device-plugin mode.
func gpumemAccepts(models []string, model string) bool {
	req := gpumem.PodRequest{}
	req.SetModels(models)
	return req.AcceptsModel(model)
}

func TestModelSelectorMatchesGPUMem(t *testing.T) {
	tests := []struct {
		name   string
		models []string
		model  string
		want   bool
	}{
		// gpumem's own cases (pkg/gpumem/request_test.go).
		{"token", []string{"A100"}, "NVIDIA A100-SXM4-40GB", true},
		{"run of tokens", []string{"a100-sxm4"}, "NVIDIA A100-SXM4-40GB", true},
		{"prefix of a token", []string{"A10"}, "NVIDIA A100-SXM4-40GB", false},
		{"whole model", []string{"A10"}, "NVIDIA A10", true},
		{"short", []string{"T4"}, "Tesla T4", true},
		{"same prefix other token", []string{"V100M16"}, "V100M32", false},
		{"tokens out of order", []string{"SXM4 A100"}, "NVIDIA A100-SXM4-40GB", false},
		// A list, separators, case.
		{"list first", []string{"A100", "H100"}, "NVIDIA A100 80GB PCIe", true},
		{"list second", []string{"A100", "H100"}, "NVIDIA H100 80GB HBM3", true},
		{"list none", []string{"A100", "H100"}, "Tesla V100-SXM2-32GB", false},
		{"lower case model", []string{"H100"}, "nvidia h100", true},
		{"other separators", []string{"a100 sxm4"}, "NVIDIA_A100__SXM4/40GB", true},
		{"gap in the run", []string{"A100-80GB"}, "NVIDIA A100-SXM4-80GB", false},
		{"suffix of a token", []string{"100"}, "NVIDIA A100", false},
		{"digits token", []string{"80GB"}, "NVIDIA A100-SXM4-80GB", true},
		{"empty model", []string{"A100"}, "", false},
		// Runes outside ASCII: Go lower-cases the Kelvin sign and U+0130 to ASCII letters,
		// the long s stays a separator, Ä is a separator.
		{"kelvin sign", []string{"K80"}, "Tesla \u212a80", true},
		{"dotted capital I", []string{"i100"}, "X \u0130100", true},
		{"long s", []string{"s100"}, "X \u017f100", false},
		{"long s separates", []string{"x 100"}, "X\u017f100", true},
		{"umlaut separates", []string{"100"}, "\u00c4100", true},
		{"umlaut entry", []string{"\u00c4100"}, "A100", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			expr, err := draconvert.ModelSelector(draconvert.DefaultDriver, tt.models)
			if err != nil {
				t.Fatalf("ModelSelector(%q): %v", tt.models, err)
			}
			if got := gpumemAccepts(tt.models, tt.model); got != tt.want {
				t.Fatalf("gpumem accepts %q for %q: %v, want %v (the table is wrong)", tt.model, tt.models, got, tt.want)
			}
			if got := compileSelector(t, expr).accepts(t, card(&tt.model)); got != tt.want {
				t.Errorf("selector %s accepts %q: %v, want %v", expr, tt.model, got, tt.want)
			}
		})
	}
}

func TestModelSelectorDevices(t *testing.T) {
	expr, err := draconvert.ModelSelector(draconvert.DefaultDriver, []string{"A100"})
	if err != nil {
		t.Fatal(err)
	}
	sel := compileSelector(t, expr)
	other := card(ptr.To("NVIDIA A100"))
	other.Driver = "gpu.nvidia.com"
	tests := []struct {
		name string
		dev  dracel.Device
		want bool
	}{
		{"model matches", card(ptr.To("NVIDIA A100-SXM4-40GB")), true},
		{"no model attribute: refused, not an error", card(nil), false},
		{"another driver's device", other, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := sel.accepts(t, tt.dev); got != tt.want {
				t.Errorf("accepts = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestModelSelectorRefuses(t *testing.T) {
	long := strings.Repeat("a-", 32)[:63]
	tests := []struct {
		name   string
		models []string
	}{
		{"no entry with a token", []string{"--", " / "}},
		{"selector too long", repeat(func(i int) string { return strconv.Itoa(i) + long[:61] }, 32)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if expr, err := draconvert.ModelSelector(draconvert.DefaultDriver, tt.models); !errors.Is(err, draconvert.ErrNotExpressible) {
				t.Errorf("ModelSelector = %q, %v; want ErrNotExpressible", expr, err)
			}
		})
	}
}

// TestModelSelectorLargest: a list at the contract's limits (32 entries of 64 bytes) of short
// tokens, whose selector is near the API server's length limit, compiles within its cost limit
// and tells its models from others.
func TestModelSelectorLargest(t *testing.T) {
	models := repeat(func(i int) string { return (strconv.Itoa(i) + strings.Repeat("-ab", 40))[:64] }, 32)
	expr, err := draconvert.ModelSelector(draconvert.DefaultDriver, models)
	if err != nil {
		t.Fatal(err)
	}
	if len(expr) < 8<<10 {
		t.Fatalf("selector of %d bytes: the test wants one near the %d-byte limit", len(expr), resourcev1.CELSelectorExpressionMaxLength)
	}
	sel := compileSelector(t, expr)
	if !sel.accepts(t, card(&models[31])) || sel.accepts(t, card(ptr.To(models[31][:50]))) {
		t.Errorf("selector of 32 models does not tell its models from others")
	}
}

// TestModelSelectorFoldsComplete: gpumem lower-cases with unicode.ToLower; the only non-ASCII
// runes it maps into [a-z0-9] are those the selector replaces, and each reads as its letter.
func TestModelSelectorFoldsComplete(t *testing.T) {
	var folding []rune
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		if l := unicode.ToLower(r); l < 0x80 && (l >= 'a' && l <= 'z' || l >= '0' && l <= '9') {
			folding = append(folding, r)
		}
	}
	if want := []rune{'\u0130', '\u212a'}; string(folding) != string(want) {
		t.Fatalf("runes lower-cased into ASCII = %q, want %q: extend asciiFolds", string(folding), string(want))
	}
	for _, r := range folding {
		l := string(unicode.ToLower(r))
		expr, err := draconvert.ModelSelector(draconvert.DefaultDriver, []string{l + "80"})
		if err != nil {
			t.Fatal(err)
		}
		model := "X " + string(r) + "80"
		if got, want := compileSelector(t, expr).accepts(t, card(&model)), gpumemAccepts([]string{l + "80"}, model); got != want || !want {
			t.Errorf("%q with entry %q: selector %v, gpumem %v, want both true", model, l+"80", got, want)
		}
	}
}

// TestModelSelectorRandom compares the selector with gpumem on random lists and models drawn
// from letters, digits, separators and the runes that lower-case specially.
func TestModelSelectorRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(42, 7))
	alphabet := []rune("aAbB01 -_K\u212a\u0130i\u017fs\u00c4")
	word := func(n int) string {
		var b strings.Builder
		for range rng.IntN(n) + 1 {
			b.WriteRune(alphabet[rng.IntN(len(alphabet))])
		}
		return b.String()
	}
	agreed, accepted := 0, 0
	for range 200 {
		models := repeat(func(int) string { return word(4) }, rng.IntN(3)+1)
		expr, err := draconvert.ModelSelector(draconvert.DefaultDriver, models)
		if errors.Is(err, draconvert.ErrNotExpressible) {
			continue // no entry with a token
		}
		if err != nil {
			t.Fatal(err)
		}
		sel := compileSelector(t, expr)
		for range 20 {
			model := word(8)
			got, want := sel.accepts(t, card(&model)), gpumemAccepts(models, model)
			if got != want {
				t.Fatalf("models %q, card %q: selector %v, gpumem %v\nselector: %s", models, model, got, want, expr)
			}
			agreed++
			if want {
				accepted++
			}
		}
	}
	// The comparison means something only if both verdicts occur often.
	if accepted < agreed/20 || accepted > agreed-agreed/20 {
		t.Errorf("%d of %d random cards accepted: the draw does not exercise both verdicts", accepted, agreed)
	}
}

// FuzzModelSelector compares the selector with gpumem on any list and card model.
func FuzzModelSelector(f *testing.F) {
	f.Add("A100|H100", "NVIDIA A100-SXM4-40GB")
	f.Add("a100-sxm4", "NVIDIA A100-SXM4-40GB")
	f.Add("K80", "Tesla \u212a80")
	f.Add("s1", "\u017f1")
	f.Fuzz(func(t *testing.T, list, model string) {
		models := gpumem.ParseModels(list)
		if len(models) == 0 || len(models) > 32 || len(model) > resourcev1.DeviceAttributeMaxValueLength || !utf8Valid(list+model) {
			return
		}
		expr, err := draconvert.ModelSelector(draconvert.DefaultDriver, models)
		if err != nil {
			if !errors.Is(err, draconvert.ErrNotExpressible) {
				t.Fatal(err)
			}
			return
		}
		if got, want := compileSelector(t, expr).accepts(t, card(&model)), gpumemAccepts(models, model); got != want {
			t.Errorf("models %q, card %q: selector %v, gpumem %v", models, model, got, want)
		}
	})
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func repeat(f func(int) string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}
