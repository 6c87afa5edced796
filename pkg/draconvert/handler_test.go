package draconvert_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
)

const optedOutNamespace = "team-dp"

// namespaces are the cluster's namespaces: testNamespace, one that opted out, kube-system.
func namespaces() []runtime.Object {
	return []runtime.Object{
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}},
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: optedOutNamespace, Labels: map[string]string{draconvert.ModeLabel: draconvert.ModeDevicePlugin}}},
		&v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceSystem}},
	}
}

type reviewOption func(*admissionv1.AdmissionRequest)

// podReview is the review kube-apiserver sends for creating pod.
func podReview(t *testing.T, pod *v1.Pod, opts ...reviewOption) *admissionv1.AdmissionReview {
	t.Helper()
	pod = pod.DeepCopy()
	pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	req := &admissionv1.AdmissionRequest{
		UID: "uid-1", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Namespace: pod.Namespace, Name: pod.Name, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw},
	}
	for _, o := range opts {
		o(req)
	}
	return &admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req}
}

func dryRun(r *admissionv1.AdmissionRequest) { r.DryRun = new(true) }

func inNamespace(ns string) reviewOption {
	return func(r *admissionv1.AdmissionRequest) { r.Namespace = ns }
}

func encode(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// post sends body to h and returns the status and the decoded review (nil unless 200).
func post(t *testing.T, h http.Handler, body []byte) (int, *admissionv1.AdmissionReview, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), http.MethodPost, draconvert.Path, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		return rec.Code, nil, rec.Body.String()
	}
	out := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
		t.Fatalf("answer %s: %v", rec.Body, err)
	}
	return rec.Code, out, rec.Body.String()
}

func newHandler(t *testing.T, client *fake.Clientset, opts ...draconvert.Option) *draconvert.Handler {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	h, err := draconvert.NewHandler(client, contract.DefaultNames(), logger, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// otherTemplates are n claim templates of the conversion in the test namespace, of shapes
// no test pod asks.
func otherTemplates(n int) []runtime.Object {
	out := make([]runtime.Object, n)
	for i := range out {
		out[i] = &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("gpushare-other-%d", i), Namespace: testNamespace,
			Labels: map[string]string{draconvert.ManagedByLabel: draconvert.ManagedBy}}}
	}
	return out
}

// calls lists the API calls the handler made as "verb resource".
func calls(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		out = append(out, a.GetVerb()+" "+a.GetResource().Resource)
	}
	return out
}

func TestHandlerAdmits(t *testing.T) {
	gpu := makePod(app("main", 4, defaulted))
	mirror := makePod(app("main", 4), annotate(v1.MirrorPodAnnotationKey, "x"))
	dead := func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewServiceUnavailable("etcd is gone")
	}
	tests := []struct {
		name       string
		review     *admissionv1.AdmissionReview
		reactors   map[string]k8stesting.ReactionFunc // "verb resource"
		existing   []runtime.Object
		wantPatch  bool
		wantDenied int32  // the code of a denial; 0: allowed
		message    string // in the denial
		wantCalls  []string
	}{
		{name: "gpu-mem pod: converted", review: podReview(t, gpu), wantPatch: true,
			wantCalls: []string{"get namespaces", "get resourceclaimtemplates", "list resourceclaimtemplates", "create resourceclaimtemplates"}},
		{name: "dry run: converted, no template made", review: podReview(t, gpu, dryRun), wantPatch: true,
			wantCalls: []string{"get namespaces", "get resourceclaimtemplates"}},
		{name: "dry run, template of another spec: refused", review: podReview(t, gpu, dryRun), existing: []runtime.Object{conflictingTemplate(t)},
			wantDenied: http.StatusConflict, message: "delete it", wantCalls: []string{"get namespaces", "get resourceclaimtemplates"}},
		{name: "existing template: reused", review: podReview(t, gpu), wantPatch: true,
			existing:  []runtime.Object{stored(templatesOf(t, app("main", 4))[0], testNamespace)},
			wantCalls: []string{"get namespaces", "get resourceclaimtemplates"}},
		{name: "pod opted out", review: podReview(t, makePod(app("main", 4), label(draconvert.ModeLabel, draconvert.ModeDevicePlugin)))},
		{name: "namespace opted out", review: podReview(t, gpu, inNamespace(optedOutNamespace)), wantCalls: []string{"get namespaces"}},
		{name: "kube-system", review: podReview(t, gpu, inNamespace(metav1.NamespaceSystem))},
		{name: "mirror pod", review: podReview(t, mirror)},
		{name: "no gpu-mem", review: podReview(t, makePod(app("main", 0)))},
		{name: "update", review: podReview(t, gpu, func(r *admissionv1.AdmissionRequest) { r.Operation = admissionv1.Update })},
		{name: "subresource", review: podReview(t, gpu, func(r *admissionv1.AdmissionRequest) { r.SubResource = "binding" })},
		{name: "not a pod", review: podReview(t, gpu, func(r *admissionv1.AdmissionRequest) {
			r.Kind, r.Resource = metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}
		})},
		{name: "invalid ask: refused", review: podReview(t, makePod(app("main", 3), annotate(contract.DefaultGPUsPerContainer, "2"))),
			wantDenied: http.StatusUnprocessableEntity, message: "do not split evenly over 2 GPUs", wantCalls: []string{"get namespaces"}},
		{name: "API server gone: refused", review: podReview(t, gpu), reactors: map[string]k8stesting.ReactionFunc{"create resourceclaimtemplates": dead},
			wantDenied: http.StatusInternalServerError, message: "etcd is gone",
			wantCalls: []string{"get namespaces", "get resourceclaimtemplates", "list resourceclaimtemplates", "create resourceclaimtemplates"}},
		{name: "namespace unreadable: refused", review: podReview(t, gpu), reactors: map[string]k8stesting.ReactionFunc{"get namespaces": dead},
			wantDenied: http.StatusInternalServerError, message: "etcd is gone", wantCalls: []string{"get namespaces"}},
		{name: "template of another spec: refused", review: podReview(t, gpu), existing: []runtime.Object{conflictingTemplate(t)},
			wantDenied: http.StatusConflict, message: "delete it", wantCalls: []string{"get namespaces", "get resourceclaimtemplates"}},
		{name: "namespace full: refused, nothing created", review: podReview(t, gpu), existing: otherTemplates(draconvert.DefaultMaxTemplates),
			wantDenied: http.StatusForbidden, message: "too many gpushare claim templates",
			wantCalls: []string{"get namespaces", "get resourceclaimtemplates", "list resourceclaimtemplates"}},
		{name: "namespace full, template existing: reused", review: podReview(t, gpu), wantPatch: true,
			existing:  append(otherTemplates(draconvert.DefaultMaxTemplates), stored(templatesOf(t, app("main", 4))[0], testNamespace)),
			wantCalls: []string{"get namespaces", "get resourceclaimtemplates"}},
		{name: "one short of full: created", review: podReview(t, gpu), existing: otherTemplates(draconvert.DefaultMaxTemplates - 1), wantPatch: true,
			wantCalls: []string{"get namespaces", "get resourceclaimtemplates", "list resourceclaimtemplates", "create resourceclaimtemplates"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(append(namespaces(), tt.existing...)...)
			for key, r := range tt.reactors {
				verb, res, _ := strings.Cut(key, " ")
				client.PrependReactor(verb, res, r)
			}
			code, out, body := post(t, newHandler(t, client), encode(t, tt.review))
			if code != http.StatusOK {
				t.Fatalf("status %d: %s", code, body)
			}
			checkResponse(t, tt.review, out, tt.wantPatch, tt.wantDenied, tt.message)
			if diff := cmp.Diff(tt.wantCalls, calls(client)); diff != "" {
				t.Errorf("API calls (-want,+got):\n%s", diff)
			}
		})
	}
}

// conflictingTemplate is a template of the name a 4-unit ask gets, asking something else.
func conflictingTemplate(t *testing.T) *resourcev1.ResourceClaimTemplate {
	tmpl := stored(templatesOf(t, app("main", 4))[0], testNamespace)
	tmpl.Spec.Spec.Devices.Requests[0].Exactly.AllocationMode = resourcev1.DeviceAllocationModeAll
	return tmpl
}

// checkResponse checks the answer to in: its uid and type, and a patch, a denial or neither.
func checkResponse(t *testing.T, in, out *admissionv1.AdmissionReview, wantPatch bool, wantDenied int32, message string) {
	t.Helper()
	resp := out.Response
	if out.TypeMeta != in.TypeMeta || resp == nil || resp.UID != in.Request.UID {
		t.Fatalf("answer %+v to review %s: want the same apiVersion and kind and uid %s", out, in.Request.UID, in.Request.UID)
	}
	switch {
	case wantDenied != 0:
		if resp.Allowed || resp.Result == nil || resp.Result.Code != wantDenied || !strings.Contains(resp.Result.Message, message) || resp.Patch != nil {
			t.Errorf("response %+v (result %+v), want denied with code %d saying %q and no patch", resp, resp.Result, wantDenied, message)
		}
	case !resp.Allowed:
		t.Errorf("denied: %+v", resp.Result)
	case wantPatch != (resp.Patch != nil) || wantPatch && (resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch):
		t.Errorf("patch %s (type %v), want a JSON patch: %v", resp.Patch, resp.PatchType, wantPatch)
	}
}

// TestHandlerRoundTrip: a review through a real HTTP server; the patch it answers, applied to
// the pod, gives the converted pod, and the template it names exists.
func TestHandlerRoundTrip(t *testing.T) {
	pod := makePod(initApp("warm", 2, defaulted), app("main", 8, defaulted), app("log", 0),
		annotate(contract.DefaultGPUsPerContainer, "2"), annotate(contract.DefaultModelKey, "A100"), annotate(contract.DefaultCoreKey, "40"))
	client := fake.NewClientset(namespaces()...)
	srv := httptest.NewServer(newHandler(t, client))
	defer srv.Close()
	in := podReview(t, pod)
	resp, err := srv.Client().Post(srv.URL+draconvert.Path, "application/json", bytes.NewReader(encode(t, in)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	out := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	checkResponse(t, in, out, true, 0, "")
	cfg := draconvert.DefaultConfig(contract.DefaultNames())
	conv, err := draconvert.Convert(pod, &cfg)
	if err != nil {
		t.Fatal(err)
	}
	checkClaims(t, conv, []wantClaim{
		{podClaim: "gpushare-init-0", container: "warm", init: true, units: 2, count: 2, memory: "1Gi", cores: "40", models: []string{"A100"}},
		{podClaim: "gpushare-0", container: "main", units: 8, count: 2, memory: "4Gi", cores: "40", models: []string{"A100"}},
	})
	got := applyPatch(t, pod, out.Response.Patch)
	if diff := cmp.Diff(converted(t, pod, contract.DefaultResourceName, conv.Claims), got, quantities()); diff != "" {
		t.Errorf("patched pod (-want,+got):\n%s", diff)
	}
	for _, c := range got.Spec.ResourceClaims {
		tmpl, err := client.ResourceV1().ResourceClaimTemplates(testNamespace).Get(t.Context(), *c.ResourceClaimTemplateName, metav1.GetOptions{})
		if err != nil {
			t.Errorf("pod claim %s: %v", c.Name, err)
			continue
		}
		if !strings.HasPrefix(tmpl.Name, draconvert.ClaimPrefix) || tmpl.Labels[draconvert.ManagedByLabel] != draconvert.ManagedBy {
			t.Errorf("template %s labels %v", tmpl.Name, tmpl.Labels)
		}
	}
	for _, c := range append(got.Spec.InitContainers, got.Spec.Containers...) {
		if _, ok := c.Resources.Limits[contract.DefaultResourceName]; ok {
			t.Errorf("container %s still asks gpu-mem", c.Name)
		}
	}
}

func TestHandlerMalformed(t *testing.T) {
	gpu := makePod(app("main", 4))
	withRequest := func(f func(*admissionv1.AdmissionReview)) []byte {
		r := podReview(t, gpu)
		f(r)
		return encode(t, r)
	}
	tests := []struct {
		name    string
		method  string
		body    []byte
		opts    []draconvert.Option
		want    int
		message string
	}{
		{"not JSON", http.MethodPost, []byte("{"), nil, http.StatusBadRequest, "decoding the AdmissionReview"},
		{"v1beta1", http.MethodPost, withRequest(func(r *admissionv1.AdmissionReview) { r.APIVersion = "admission.k8s.io/v1beta1" }), nil, http.StatusBadRequest, "want an AdmissionReview"},
		{"not a review", http.MethodPost, encode(t, gpu), nil, http.StatusBadRequest, "want an AdmissionReview"},
		{"no request", http.MethodPost, withRequest(func(r *admissionv1.AdmissionReview) { r.Request = nil }), nil, http.StatusBadRequest, "no request"},
		{"no uid", http.MethodPost, withRequest(func(r *admissionv1.AdmissionReview) { r.Request.UID = "" }), nil, http.StatusBadRequest, "no request uid"},
		{"pod not a pod", http.MethodPost, withRequest(func(r *admissionv1.AdmissionReview) { r.Request.Object.Raw = []byte(`{"spec":7}`) }), nil,
			http.StatusBadRequest, "decoding the pod"},
		{"GET", http.MethodGet, nil, nil, http.StatusMethodNotAllowed, "POST an AdmissionReview"},
		{"too large", http.MethodPost, encode(t, podReview(t, gpu)), []draconvert.Option{draconvert.WithMaxBody(64)}, http.StatusRequestEntityTooLarge, "larger than 64 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(namespaces()...)
			rec := httptest.NewRecorder()
			newHandler(t, client, tt.opts...).ServeHTTP(rec, httptest.NewRequestWithContext(t.Context(), tt.method, draconvert.Path, bytes.NewReader(tt.body)))
			var body struct {
				Error string `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || rec.Code != tt.want || !strings.Contains(body.Error, tt.message) {
				t.Errorf("answer %d %s, want %d with a JSON error saying %q", rec.Code, rec.Body, tt.want, tt.message)
			}
			if len(client.Actions()) != 0 {
				t.Errorf("API calls %v, want none", calls(client))
			}
		})
	}
}

// TestHandlerConcurrent: pods of one shape admitted at once in one namespace all convert and
// share one template, whichever admission created it.
func TestHandlerConcurrent(t *testing.T) {
	client := fake.NewClientset(namespaces()...)
	srv := httptest.NewServer(newHandler(t, client))
	defer srv.Close()
	const pods = 8
	var wg sync.WaitGroup
	errs := make(chan string, pods)
	for i := range pods {
		wg.Go(func() {
			in := podReview(t, makePod(app("main", 4)), func(r *admissionv1.AdmissionRequest) { r.UID = types.UID("uid-" + strconv.Itoa(i)) })
			resp, err := srv.Client().Post(srv.URL+draconvert.Path, "application/json", bytes.NewReader(encode(t, in)))
			if err != nil {
				errs <- err.Error()
				return
			}
			defer func() { _ = resp.Body.Close() }()
			raw, _ := io.ReadAll(resp.Body)
			out := &admissionv1.AdmissionReview{}
			if err := json.Unmarshal(raw, out); err != nil || out.Response == nil || !out.Response.Allowed || out.Response.Patch == nil || out.Response.UID != in.Request.UID {
				errs <- string(raw)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("admission failed: %s", e)
	}
	list, err := client.ResourceV1().ResourceClaimTemplates(testNamespace).List(t.Context(), metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("templates %v (%v), want one", list, err)
	}
}

func TestHandlerOptions(t *testing.T) {
	gpu := makePod(app("main", 4))
	tests := []struct {
		name      string
		namespace string
		opts      []draconvert.Option
		wantPatch bool
		wantClass string // of the template made; "" when none is
	}{
		{"exempt namespace", testNamespace, []draconvert.Option{draconvert.WithExemptNamespaces(testNamespace)}, false, ""},
		{"kube-system no longer exempt", metav1.NamespaceSystem, []draconvert.Option{draconvert.WithExemptNamespaces()}, true, draconvert.DefaultDeviceClass},
		{"device class", testNamespace, []draconvert.Option{draconvert.WithDeviceClass("gpu.example.com")}, true, "gpu.example.com"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset(namespaces()...)
			in := podReview(t, gpu, inNamespace(tt.namespace))
			_, out, _ := post(t, newHandler(t, client, tt.opts...), encode(t, in))
			checkResponse(t, in, out, tt.wantPatch, 0, "")
			list, err := client.ResourceV1().ResourceClaimTemplates(in.Request.Namespace).List(t.Context(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var classes []string
			for _, tmpl := range list.Items {
				classes = append(classes, tmpl.Spec.Spec.Devices.Requests[0].Exactly.DeviceClassName)
			}
			if want := strings.Fields(tt.wantClass); !slices.Equal(want, classes) {
				t.Errorf("templates of classes %q, want %q", classes, want)
			}
		})
	}
}

func TestNewHandlerRefusesBadConfig(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	for name, opt := range map[string]draconvert.Option{
		"device class": draconvert.WithDeviceClass("Not A Name"),
		"driver":       draconvert.WithDriver(""),
		"max body":     draconvert.WithMaxBody(0),
	} {
		if _, err := draconvert.NewHandler(fake.NewClientset(), contract.DefaultNames(), logger, opt); err == nil {
			t.Errorf("%s: NewHandler accepted a bad config", name)
		}
	}
}
