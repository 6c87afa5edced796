package draconvert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	admissionv1 "k8s.io/api/admission/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
)

// Handler is the mutating admission webhook of the DRA mode: it answers AdmissionReviews
// (admission.k8s.io/v1) for pods that are created, turning their gpu-mem asks into DRA claims
// (Convert) after making the claims' templates exist in the pod's namespace
// (TemplateEnsurer). Pods that ask no gpu-mem, that opt out (ModeLabel on the pod or its
// namespace), that live in an exempt namespace or are mirror pods are allowed as written.
type Handler struct {
	cfg     Config
	client  kubernetes.Interface
	ensurer *TemplateEnsurer
	exempt  []string
	maxBody int64
	// maxTemplates bounds the claim templates created in one namespace (TemplateEnsurer).
	maxTemplates int
	logger       klog.Logger
}

var _ http.Handler = (*Handler)(nil)

// NewHandler returns the webhook for pods asking names.Resource, reading namespaces and
// creating claim templates with client.
func NewHandler(client kubernetes.Interface, names contract.Names, logger klog.Logger, opts ...Option) (*Handler, error) {
	h := &Handler{cfg: DefaultConfig(names), client: client, exempt: defaultExempt(), maxBody: DefaultMaxBody,
		maxTemplates: DefaultMaxTemplates, logger: logger}
	for _, o := range opts {
		o(h)
	}
	h.ensurer = NewTemplateEnsurer(client, h.maxTemplates)
	if err := h.cfg.Validate(); err != nil {
		return nil, err
	}
	if h.maxBody <= 0 {
		return nil, fmt.Errorf("%w: max body %d must be positive", ErrInvalidConfig, h.maxBody)
	}
	return h, nil
}

// ServeHTTP answers one AdmissionReview. A review that cannot be read gets a 400 (413 when too
// large) with a JSON error; every review that can, a 200 with the review's response.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("method %s is not allowed on %s; POST an AdmissionReview", r.Method, r.URL.Path))
		return
	}
	review, pod, status, err := h.decode(w, r)
	if err != nil {
		writeError(w, status, err)
		return
	}
	ctx := klog.NewContext(r.Context(), h.logger)
	resp := &admissionv1.AdmissionResponse{Allowed: true}
	if pod != nil {
		resp = h.admit(ctx, review.Request, pod)
	}
	resp.UID = review.Request.UID
	writeJSON(w, http.StatusOK, &admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp})
}

// decode reads the review, and the pod when the review is for a pod being created (nil
// otherwise). On error it returns the status to answer with.
func (h *Handler) decode(w http.ResponseWriter, r *http.Request) (*admissionv1.AdmissionReview, *v1.Pod, int, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.maxBody))
	if err != nil {
		if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
			return nil, nil, http.StatusRequestEntityTooLarge, fmt.Errorf("the AdmissionReview is larger than %d bytes", h.maxBody)
		}
		return nil, nil, http.StatusBadRequest, fmt.Errorf("reading the AdmissionReview: %w", err)
	}
	review := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(body, review); err != nil {
		return nil, nil, http.StatusBadRequest, fmt.Errorf("decoding the AdmissionReview: %w", err)
	}
	if gvk := review.GroupVersionKind(); gvk != admissionv1.SchemeGroupVersion.WithKind("AdmissionReview") {
		return nil, nil, http.StatusBadRequest, fmt.Errorf("the body is a %q of %q, want an AdmissionReview of %s (admissionReviewVersions: [v1])",
			gvk.Kind, gvk.GroupVersion().String(), admissionv1.SchemeGroupVersion.String())
	}
	req := review.Request
	if req == nil || req.UID == "" {
		return nil, nil, http.StatusBadRequest, errors.New("the AdmissionReview has no request or no request uid")
	}
	if !isPodCreate(req) {
		return review, nil, 0, nil
	}
	pod := &v1.Pod{}
	if err := json.Unmarshal(req.Object.Raw, pod); err != nil {
		return nil, nil, http.StatusBadRequest, fmt.Errorf("decoding the pod of the AdmissionReview: %w", err)
	}
	return review, pod, 0, nil
}

// isPodCreate reports whether req creates a pod (not a subresource).
func isPodCreate(req *admissionv1.AdmissionRequest) bool {
	return req.Operation == admissionv1.Create && req.Kind.Group == "" && req.Kind.Kind == "Pod" &&
		req.Resource.Resource == "pods" && req.SubResource == ""
}

// admit decides on a pod being created.
func (h *Handler) admit(ctx context.Context, req *admissionv1.AdmissionRequest, pod *v1.Pod) *admissionv1.AdmissionResponse {
	logger := klog.FromContext(ctx).WithValues("pod", klog.KRef(req.Namespace, pod.Name), "generateName", pod.GenerateName, "uid", req.UID)
	if reason := h.skipReason(pod, req.Namespace); reason != "" || !AsksResource(pod, &h.cfg.Names) {
		logger.V(5).Info("Pod left as written", "reason", reason)
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	optedOut, err := h.namespaceOptedOut(ctx, req.Namespace)
	switch {
	case err != nil:
		logger.Error(err, "Refusing a gpu-mem pod: cannot tell whether its namespace opted out")
		return denied(http.StatusInternalServerError, metav1.StatusReasonInternalError, err)
	case optedOut:
		logger.V(4).Info("Pod left as written", "reason", "namespace label "+ModeLabel+"="+ModeDevicePlugin)
		return &admissionv1.AdmissionResponse{Allowed: true}
	}
	conv, err := Convert(pod, &h.cfg)
	if err != nil {
		logger.V(2).Info("Refused a gpu-mem pod DRA cannot serve", "err", err)
		return denied(http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, err)
	}
	dryRun := req.DryRun != nil && *req.DryRun
	ensure := h.ensurer.Ensure
	if dryRun { // sideEffects NoneOnDryRun: read, never create
		ensure = h.ensurer.Check
	}
	if err := ensure(ctx, req.Namespace, conv.Templates()); err != nil {
		logger.Error(err, "Refusing a gpu-mem pod: its claim templates could not be made", "dryRun", dryRun)
		if errors.Is(err, ErrTemplateConflict) {
			return denied(http.StatusConflict, metav1.StatusReasonConflict, err)
		}
		if errors.Is(err, ErrTooManyTemplates) {
			return denied(http.StatusForbidden, metav1.StatusReasonForbidden, err)
		}
		return denied(http.StatusInternalServerError, metav1.StatusReasonInternalError, err)
	}
	logger.V(2).Info("Converted gpu-mem asks to DRA claims", "claims", len(conv.Claims), "templates", templateNames(conv), "dryRun", dryRun)
	return &admissionv1.AdmissionResponse{Allowed: true, Patch: conv.Patch, PatchType: new(admissionv1.PatchTypeJSONPatch)}
}

// denied is a refusal with err's message.
func denied(code int32, reason metav1.StatusReason, err error) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: code, Reason: reason, Message: err.Error(),
	}}
}

// templateNames lists the names of conv's templates, for the log.
func templateNames(conv *Conversion) []string {
	var out []string
	for _, t := range conv.Templates() {
		out = append(out, t.Name)
	}
	return out
}

// errorBody is the JSON of an error answer.
type errorBody struct {
	Error string `json:"error"`
}

// writeError answers status with err as JSON.
func writeError(w http.ResponseWriter, status int, err error) {
	writeJSON(w, status, errorBody{Error: err.Error()})
}

// writeJSON answers v as JSON with its Content-Length, so that the API server can reuse the
// connection; a 500 if v cannot be encoded.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":"encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
