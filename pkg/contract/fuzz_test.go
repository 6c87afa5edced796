package contract_test

import (
	"encoding/json"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/gpumem"
)

// The fuzz targets of the contract's parsers. `go test` replays their seeds and the inputs
// under testdata/fuzz/<target>/ as regression tests; `make fuzz` mutates them (CONTRIBUTING.md).

// fuzzPod is a pod with the given containers and annotations (nil: none).
func fuzzPod(inits, apps []v1.Container, ann map[string]string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", UID: "uid-p", Annotations: ann},
		Spec:       v1.PodSpec{InitContainers: inits, Containers: apps},
	}
}

// gpuMemContainer is a container asking units of gpu-mem in limits (and requests when req is
// set); a nil quantity leaves that side unset.
func gpuMemContainer(name string, lim, req *resource.Quantity) v1.Container {
	c := v1.Container{Name: name}
	if lim != nil {
		c.Resources.Limits = v1.ResourceList{contract.DefaultResourceName: *lim}
	}
	if req != nil {
		c.Resources.Requests = v1.ResourceList{contract.DefaultResourceName: *req}
	}
	return c
}

// fuzzQuantity parses s as the API server would have, nil for "" (the field is unset). An s
// that does not parse skips the input: no pod could carry it.
func fuzzQuantity(t *testing.T, s string) *resource.Quantity {
	t.Helper()
	if s == "" {
		return nil
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		t.Skip("not a quantity the API server accepts")
	}
	return &q
}

// wantUnits is the contract's rule for one limit, written independently of the parser: a whole
// number of units from 1 to MaxUnitsPerContainer.
func wantUnits(q resource.Quantity) (int64, bool) {
	v := q.Value() // rounds fractions up, saturates huge values
	if q.Cmp(*resource.NewQuantity(v, resource.DecimalSI)) != 0 {
		return 0, false
	}
	return v, v >= 1 && v <= contract.MaxUnitsPerContainer
}

// wantGPUCount is the gpu-count annotation rule, the admission policy's: once trimmed of
// surrounding spaces, '^[0-9]{1,6}$' (no sign) of a value from 1 to MaxGPUsPerContainer.
func wantGPUCount(v string, set bool) (int, bool) {
	if !set {
		return 1, true
	}
	v = strings.TrimSpace(v)
	if ok, _ := regexp.MatchString(`^[0-9]{1,6}$`, v); !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	return n, err == nil && n >= 1 && n <= contract.MaxGPUsPerContainer
}

// FuzzParseRequest feeds ParseRequest a pod of an init container (limits and requests fuzzed)
// and an app container (limits fuzzed), with or without the gpu-count and gpu-model
// annotations. It checks the outcome against the contract's rules (docs/contract.md): an error
// exactly when a rule is broken, always wrapping ErrInvalidRequest; otherwise every container's
// units, card count, key and order, and the models, as the rules give them.
func FuzzParseRequest(f *testing.F) {
	f.Add("4", "", "2", "", false, "", false)
	f.Add("4", "4", "6", "2", true, "A100|H100", true)
	f.Add("", "3", "1", "", false, "", false)
	f.Add("10G", "", "1500m", "", false, "", false)
	f.Add("2000m", "2", "1048577", " 64 ", true, "|", true)
	f.Add("0", "", "-1", "0", true, " ", true)
	f.Add("1Ki", "1024", "9223372036854775807", "+2", true, "t4 | ", true)
	f.Add("", "", "1", "", false, strings.Repeat("a|", contract.MaxModelEntries+1), true)
	f.Add("", "", "1", "", false, strings.Repeat("b", contract.MaxModelEntryLength+1), true)
	f.Add("", "", "1", "", false, strings.Repeat("b", contract.MaxModelEntryLength)+"|c", true)
	f.Fuzz(func(t *testing.T, initLim, initReq, appLim, count string, setCount bool, model string, setModel bool) {
		il, ir, al := fuzzQuantity(t, initLim), fuzzQuantity(t, initReq), fuzzQuantity(t, appLim)
		ann := map[string]string{}
		if setCount {
			ann[contract.DefaultGPUsPerContainer] = count
		}
		if setModel {
			ann[contract.DefaultModelKey] = model
		}
		pod := fuzzPod([]v1.Container{gpuMemContainer("i", il, ir)}, []v1.Container{gpuMemContainer("a", al, nil)}, ann)
		names := contract.DefaultNames()
		got, err := contract.ParseRequest(pod, &names)

		want, wantErr := expectRequest(il, ir, al, count, setCount, model, setModel)
		if err != nil {
			if !errors.Is(err, contract.ErrInvalidRequest) {
				t.Errorf("ParseRequest() error %v does not wrap ErrInvalidRequest", err)
			}
			if diff := cmp.Diff(contract.PodRequest{}, got); diff != "" {
				t.Errorf("ParseRequest() returned a request with its error (-want,+got):\n%s", diff)
			}
		}
		if (err != nil) != wantErr {
			t.Fatalf("ParseRequest() error = %v, want error: %v (init %q/%q, app %q, count %q/%v, model %q/%v)",
				err, wantErr, initLim, initReq, appLim, count, setCount, model, setModel)
		}
		if err != nil {
			return
		}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(contract.PodRequest{}, "ModelTokens")); diff != "" {
			t.Errorf("ParseRequest() (-want,+got):\n%s", diff)
		}
		checkRequestBounds(t, &got)
	})
}

// expectRequest is what ParseRequest must return for FuzzParseRequest's pod, by the contract's
// rules; wantErr is true when one of them is broken.
func expectRequest(il, ir, al *resource.Quantity, count string, setCount bool, model string, setModel bool) (contract.PodRequest, bool) {
	gpus, ok := wantGPUCount(count, setCount)
	if !ok {
		return contract.PodRequest{}, true
	}
	var want contract.PodRequest
	add := func(key, name string, init bool, lim, req *resource.Quantity) bool {
		switch {
		case lim == nil && req == nil:
			return true
		case lim == nil, req != nil && req.Cmp(*lim) != 0:
			return false
		}
		units, ok := wantUnits(*lim)
		if !ok || units%int64(gpus) != 0 {
			return false
		}
		want.Containers = append(want.Containers, contract.ContainerRequest{Key: key, Name: name, Init: init, Units: units, GPUs: gpus})
		return true
	}
	if !add("init-0", "i", true, il, ir) || !add("0", "a", false, al, nil) {
		return contract.PodRequest{}, true
	}
	if setModel && !want.Empty() {
		models, ok := wantModels(model)
		if !ok {
			return contract.PodRequest{}, true
		}
		want.Models = models
	}
	return want, false
}

// wantModels is the model annotation rule: the non-blank entries between '|', trimmed; at
// least one, at most MaxModelEntries of at most MaxModelEntryLength bytes each, in an
// annotation no longer than that many entries and separators take.
func wantModels(v string) ([]string, bool) {
	if len(v) > contract.MaxModelEntries*(contract.MaxModelEntryLength+1) {
		return nil, false
	}
	var out []string
	for _, m := range strings.Split(v, "|") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
		if len(m) > contract.MaxModelEntryLength {
			return nil, false
		}
	}
	return out, len(out) > 0 && len(out) <= contract.MaxModelEntries
}

// checkRequestBounds checks the documented bounds of a parsed request.
func checkRequestBounds(t *testing.T, r *contract.PodRequest) {
	t.Helper()
	var initMax, apps int64
	for i, c := range r.Containers {
		if c.Units < 1 || c.Units > contract.MaxUnitsPerContainer || c.GPUs < 1 || c.GPUs > contract.MaxGPUsPerContainer ||
			c.PerGPU()*int64(c.GPUs) != c.Units {
			t.Errorf("container %d = %+v: out of the contract's bounds", i, c)
		}
		if gpumem.IsInitKey(c.Key) != c.Init || (i > 0 && c.Init && !r.Containers[i-1].Init) {
			t.Errorf("container %d = %+v: key or order does not say init", i, c)
		}
		if c.Init {
			initMax = max(initMax, c.Units)
		} else {
			apps += c.Units
		}
	}
	if got := r.TotalUnits(); got != max(initMax, apps) || got < 0 {
		t.Errorf("TotalUnits() = %d, want %d", got, max(initMax, apps))
	}
}

// FuzzGPUCountAnnotation fuzzes the gpu-count annotation of a pod whose one container asks
// units: the annotation is accepted exactly when it is one to six digits (no sign; spaces
// around them allowed) of an integer from 1 to 64 that divides the units, and the container
// then spans that many cards, the same share on each.
func FuzzGPUCountAnnotation(f *testing.F) {
	for _, s := range []string{"1", "2", " 4 ", "64", "65", "0", "-2", "+2", "02", "2.0", "", "0x2", "9223372036854775808", "２"} {
		f.Add(s, int64(8))
	}
	f.Add("65", int64(130))
	f.Add("64", int64(128))
	f.Fuzz(func(t *testing.T, count string, units int64) {
		units = 1 + (units-1)&(contract.MaxUnitsPerContainer-1) // a valid ask (0 is the largest), so count alone decides
		lim := resource.NewQuantity(units, resource.DecimalSI)
		pod := fuzzPod(nil, []v1.Container{gpuMemContainer("a", lim, nil)}, map[string]string{contract.DefaultGPUsPerContainer: count})
		names := contract.DefaultNames()
		got, err := contract.ParseRequest(pod, &names)
		n, ok := wantGPUCount(count, true)
		ok = ok && units%int64(n) == 0
		if (err == nil) != ok {
			t.Fatalf("ParseRequest() with %s=%q and %d units: error = %v, want error: %v", contract.DefaultGPUsPerContainer, count, units, err, !ok)
		}
		if err != nil {
			if !errors.Is(err, contract.ErrInvalidRequest) {
				t.Errorf("error %v does not wrap ErrInvalidRequest", err)
			}
			return
		}
		want := []contract.ContainerRequest{{Key: "0", Name: "a", Units: units, GPUs: n}}
		if diff := cmp.Diff(want, got.Containers); diff != "" {
			t.Errorf("containers (-want,+got):\n%s", diff)
		}
		checkRequestBounds(t, &got)
	})
}

// FuzzGPUModelAnnotation fuzzes the gpu-model annotation of a gpu-mem pod and a card's model.
// An annotation that names no model, or too many or too long ones, is refused; otherwise the
// models are its non-blank entries, trimmed, which read back the same once joined with "|". A card is accepted exactly
// when an entry's alphanumeric tokens appear as a contiguous run of the card model's (ASCII
// letters compared case-insensitively), so every entry with a token accepts itself as a model.
func FuzzGPUModelAnnotation(f *testing.F) {
	f.Add("A100|H100", "NVIDIA A100-SXM4-40GB")
	f.Add("a100-sxm4", "NVIDIA A100-SXM4-40GB")
	f.Add("A10", "NVIDIA A100-SXM4-40GB")
	f.Add("SXM4 A100", "NVIDIA A100-SXM4-40GB")
	f.Add(" | ", "Tesla T4")
	f.Add("T4||", "tesla t4")
	f.Add("Ä100|é", "Ä100")
	f.Add("--", "")
	f.Fuzz(func(t *testing.T, model, card string) {
		lim := resource.NewQuantity(4, resource.DecimalSI)
		pod := fuzzPod(nil, []v1.Container{gpuMemContainer("a", lim, nil)}, map[string]string{contract.DefaultModelKey: model})
		names := contract.DefaultNames()
		req, err := contract.ParseRequest(pod, &names)
		entries, ok := wantModels(model)
		if !ok {
			if !errors.Is(err, contract.ErrInvalidRequest) {
				t.Fatalf("ParseRequest() with %s=%q = %v, want ErrInvalidRequest", contract.DefaultModelKey, model, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("ParseRequest() with %s=%q: %v", contract.DefaultModelKey, model, err)
		}
		if diff := cmp.Diff(entries, req.Models); diff != "" {
			t.Errorf("models (-want,+got):\n%s", diff)
		}
		if again := gpumem.ParseModels(strings.Join(req.Models, "|")); !slices.Equal(again, req.Models) {
			t.Errorf("models %q read back as %q", req.Models, again)
		}
		want := false
		for _, e := range entries {
			want = want || tokenRun(tokens(e), tokens(card))
			if len(tokens(e)) > 0 && !req.AcceptsModel(e) {
				t.Errorf("entry %q does not accept a card of model %q", e, e)
			}
		}
		if got := req.AcceptsModel(card); got != want {
			t.Errorf("AcceptsModel(%q) with %q = %v, want %v", card, model, got, want)
		}
		if got := req.AcceptsModel(swapASCIICase(card)); got != want {
			t.Errorf("AcceptsModel(%q) with %q = %v, want %v (case differs only)", swapASCIICase(card), model, got, want)
		}
	})
}

// tokens splits s into its runs of ASCII letters and digits after lower-casing every rune,
// so that a rune that lower-cases to an ASCII letter (the Kelvin sign) counts as that letter.
func tokens(s string) []string {
	var out []string
	var cur []rune
	for _, r := range s + " " {
		if r = unicode.ToLower(r); r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			cur = append(cur, r)
			continue
		}
		if len(cur) > 0 {
			out = append(out, string(cur))
			cur = nil
		}
	}
	return out
}

// tokenRun reports whether e is a non-empty contiguous run of m.
func tokenRun(e, m []string) bool {
	if len(e) == 0 {
		return false
	}
	for i := 0; i+len(e) <= len(m); i++ {
		if slices.Equal(e, m[i:i+len(e)]) {
			return true
		}
	}
	return false
}

// swapASCIICase swaps the case of ASCII letters only.
func swapASCIICase(s string) string {
	b := []byte(s)
	for i, c := range b {
		switch {
		case c >= 'a' && c <= 'z':
			b[i] = c - 'a' + 'A'
		case c >= 'A' && c <= 'Z':
			b[i] = c - 'A' + 'a'
		}
	}
	return string(b)
}

// FuzzDecodeAllocation fuzzes the placement annotation, alone and next to the predecessor's
// index annotation, as the cache and the device plugin read it (AllocationFromPod). A decoded
// placement is non-empty with GPU indexes >= 0 and units from 1 to MaxUnitsPerContainer, and
// reads back equal from its own JSON and from the annotations PlacementAnnotations writes for
// it; an error wraps ErrInvalidAllocation and comes with no placement. The index annotation
// alone gives every container its units on that GPU, when it is an integer >= 0.
func FuzzDecodeAllocation(f *testing.F) {
	f.Add(`{"0":{"1":4}}`, true, "", false)
	f.Add(`{"0":{"1":4},"1":{"0":2},"init-0":{"3":6}}`, true, "1", true)
	f.Add(`{"0":{"0":-4}}`, true, "", false)
	f.Add(`{"0":{"01":1,"1":2}}`, true, "", false)
	f.Add(`{"0":null}`, true, "", false)
	f.Add(`{"0":{}}`, true, "", false)
	f.Add(`{}`, true, "", false)
	f.Add(`{"0":{"1048577":1048576}}`, true, "", false)
	f.Add(`{"0":{"0":1048577}}`, true, "", false)
	f.Add(`{"0":{"0":0}}`, true, "", false)
	f.Add(`{"0":{"x":1}}`, true, "", false)
	f.Add(`[`, true, "", false)
	f.Add(``, false, "7", true)
	f.Add(``, false, "-1", true)
	f.Add(``, false, " 1", true)
	f.Fuzz(func(t *testing.T, raw string, hasAlloc bool, idx string, hasIdx bool) {
		a, err := contract.DecodeAllocation(raw)
		if err != nil {
			if !errors.Is(err, contract.ErrInvalidAllocation) || a != nil {
				t.Fatalf("DecodeAllocation(%q) = %v, %v: want a nil placement and ErrInvalidAllocation", raw, a, err)
			}
		} else {
			checkAllocation(t, a)
		}

		ann := map[string]string{}
		if hasAlloc {
			ann[contract.AnnotationAllocation] = raw
		}
		if hasIdx {
			ann[contract.AnnotationIndex] = idx
		}
		lim := resource.NewQuantity(4, resource.DecimalSI)
		pod := fuzzPod(nil, []v1.Container{gpuMemContainer("a", lim, nil)}, ann)
		names := contract.DefaultNames()
		req, rerr := contract.ParseRequest(pod, &names)
		if rerr != nil {
			t.Fatal(rerr)
		}
		got, ok, gerr := contract.AllocationFromPod(pod, &req)
		want, wantOK, wantErr := expectAllocation(a, err, hasAlloc, idx, hasIdx)
		if ok != wantOK || (gerr != nil) != wantErr || (gerr != nil && !errors.Is(gerr, contract.ErrInvalidAllocation)) {
			t.Fatalf("AllocationFromPod(%v) = %v, %v, %v: want ok %v, error %v", ann, got, ok, gerr, wantOK, wantErr)
		}
		if diff := cmp.Diff(want, got); ok && diff != "" {
			t.Errorf("AllocationFromPod(%v) (-want,+got):\n%s", ann, diff)
		}
	})
}

// expectAllocation is what AllocationFromPod must return for FuzzDecodeAllocation's pod, whose
// one container "0" asks 4 units.
func expectAllocation(decoded contract.Allocation, decodeErr error, hasAlloc bool, idx string, hasIdx bool) (contract.Allocation, bool, bool) {
	switch {
	case hasAlloc:
		return decoded, decodeErr == nil, decodeErr != nil
	case !hasIdx:
		return nil, false, false
	}
	g, err := strconv.Atoi(idx)
	if err != nil || g < 0 {
		return nil, false, true
	}
	return contract.Allocation{"0": {g: 4}}, true, false
}

// checkAllocation checks a decoded placement's bounds and its round trips through JSON and
// through the annotations a bind writes.
func checkAllocation(t *testing.T, a contract.Allocation) {
	t.Helper()
	if len(a) == 0 {
		t.Fatalf("decoded an empty placement without an error")
	}
	for key, gpus := range a {
		for g, u := range gpus {
			if g < 0 || u < 1 || u > contract.MaxUnitsPerContainer {
				t.Errorf("container %s: %d units on GPU %d, out of bounds", key, u, g)
			}
		}
	}
	raw, err := json.Marshal(a)
	if err != nil {
		t.Fatalf("encode %v: %v", a, err)
	}
	again, err := contract.DecodeAllocation(string(raw))
	if err != nil {
		t.Fatalf("DecodeAllocation(%s) of a decoded placement: %v", raw, err)
	}
	if diff := cmp.Diff(a, again); diff != "" {
		t.Errorf("placement changed through its JSON %s (-first,+second):\n%s", raw, diff)
	}
	gpus := a.GPUs()
	if !slices.IsSorted(gpus) || len(slices.Compact(slices.Clone(gpus))) != len(gpus) {
		t.Errorf("GPUs() = %v, want ascending and distinct", gpus)
	}
	ann, err := contract.PlacementAnnotations(a, &contract.PodRequest{}, map[int]int64{}, time.Unix(0, 1))
	if len(gpus) == 0 {
		if !errors.Is(err, contract.ErrInvalidAllocation) {
			t.Errorf("PlacementAnnotations() of a placement on no GPU = %v, want ErrInvalidAllocation", err)
		}
		return
	}
	if err != nil {
		t.Fatalf("PlacementAnnotations(): %v", err)
	}
	if ann[contract.AnnotationIndex] != strconv.Itoa(gpus[0]) {
		t.Errorf("%s = %q, want the first GPU %d", contract.AnnotationIndex, ann[contract.AnnotationIndex], gpus[0])
	}
	back, ok, err := contract.AllocationFromPod(fuzzPod(nil, nil, ann), &contract.PodRequest{})
	if err != nil || !ok {
		t.Fatalf("AllocationFromPod() of PlacementAnnotations() = %v, %v", ok, err)
	}
	if diff := cmp.Diff(a, back); diff != "" {
		t.Errorf("placement changed through the bind annotations (-want,+got):\n%s", diff)
	}
}

// FuzzDecodeGPUs fuzzes the node annotation gpushare.io/gpus, which the device plugin writes
// and the extender and the inspect CLI read. A decoded inventory is sorted by index, with
// distinct indexes >= 0 and units from 0 to MaxUnitsPerGPU, within the bounds of limits.go; it encodes (EncodeGPUs) to a value that decodes back
// equal, and encoding is stable. An error wraps ErrInvalidInventory and comes with no cards.
func FuzzDecodeGPUs(f *testing.F) {
	f.Add(`[{"index":0,"uuid":"GPU-a","model":"Tesla T4","units":15,"healthy":true}]`)
	f.Add(`[{"index":1,"units":16},{"index":0,"units":80,"healthy":true,"model":"NVIDIA A100-SXM4-80GB"}]`)
	f.Add(`[{"index":0},{"index":0}]`)
	f.Add(`[{"index":-1,"units":1}]`)
	f.Add(`[{"index":0,"units":-1}]`)
	f.Add(`[{"index":9223372036854775807,"units":9223372036854775807}]`)
	f.Add(`[{"index":0,"units":1048576},{"index":1,"units":1048577}]`)
	f.Add(`[{"index":0,"units":1,"uuid":"` + strings.Repeat("u", contract.MaxGPUFieldLength+1) + `"}]`)
	f.Add(`[{"Index":2,"UUID":"x","extra":[1,2]}]`)
	f.Add(`null`)
	f.Add(`[]`)
	f.Add(`{}`)
	f.Add(`[null]`)
	f.Add(`[{"index":1.5}]`)
	f.Add(`[{"index":0,"uuid":"GPU-a","units":1},{"index":1,"uuid":"GPU-a","units":1}]`)
	f.Add(`[{"index":0,"units":14,"memoryBytes":16106127360,"reservedBytes":471859200,"usableBytes":15634268160}]`)
	f.Fuzz(func(t *testing.T, raw string) {
		gpus, err := contract.DecodeGPUs(raw)
		if err != nil {
			if !errors.Is(err, contract.ErrInvalidInventory) || gpus != nil {
				t.Fatalf("DecodeGPUs(%q) = %v, %v: want no cards and ErrInvalidInventory", raw, gpus, err)
			}
			return
		}
		if len(raw) > contract.MaxInventoryBytes || len(gpus) > contract.MaxGPUsPerNode {
			t.Errorf("DecodeGPUs() accepted %d cards in %d bytes, beyond the bounds", len(gpus), len(raw))
		}
		uuids := map[string]bool{}
		for i, g := range gpus {
			if g.Index < 0 || g.Units < 0 || g.Units > contract.MaxUnitsPerGPU || (i > 0 && gpus[i-1].Index >= g.Index) ||
				len(g.UUID) > contract.MaxGPUFieldLength || len(g.Model) > contract.MaxGPUFieldLength {
				t.Errorf("DecodeGPUs(%q) card %d = %+v: out of bounds, or not in ascending and distinct index order", raw, i, g)
			}
			if g.MemoryBytes < 0 || g.ReservedBytes < 0 || g.UsableBytes < 0 || (g.UUID != "" && uuids[g.UUID]) {
				t.Errorf("DecodeGPUs(%q) card %d = %+v: negative memory, or a UUID named twice", raw, i, g)
			}
			uuids[g.UUID] = true
		}
		enc, err := contract.EncodeGPUs(gpus)
		if err != nil {
			t.Fatalf("EncodeGPUs(%+v): %v", gpus, err)
		}
		back, err := contract.DecodeGPUs(enc)
		if err != nil {
			t.Fatalf("DecodeGPUs(EncodeGPUs(...)) = %v for %s", err, enc)
		}
		if diff := cmp.Diff(gpus, back, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("inventory changed through %s (-first,+second):\n%s", enc, diff)
		}
		if enc2, _ := contract.EncodeGPUs(back); enc2 != enc {
			t.Errorf("encoding is not stable: %s, then %s", enc, enc2)
		}
	})
}
