package draconvert

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Path is the route the extender serves the webhook at (config/dra/webhook.yaml).
const Path = "/mutate/dra"

// DefaultMaxBody bounds an AdmissionReview's body: a pod is at most the API server's 3 MiB
// request limit, and the review adds little around it.
const DefaultMaxBody int64 = 4 << 20

// Option configures a Handler.
type Option func(*Handler)

// WithDriver sets the DRA driver name whose device attributes the claims select on
// (DefaultDriver).
func WithDriver(driver string) Option { return func(h *Handler) { h.cfg.Driver = driver } }

// WithDeviceClass sets the DeviceClass the claims ask devices of (DefaultDeviceClass).
func WithDeviceClass(class string) Option { return func(h *Handler) { h.cfg.DeviceClass = class } }

// WithExemptNamespaces sets the namespaces whose pods are never converted (kube-system by
// default). The webhook configuration's namespaceSelector should leave them out too.
func WithExemptNamespaces(namespaces ...string) Option {
	return func(h *Handler) { h.exempt = append([]string(nil), namespaces...) }
}

// WithMaxTemplates bounds the claim templates the conversion creates in one namespace
// (DefaultMaxTemplates); an ask that would create one more is refused.
func WithMaxTemplates(n int) Option { return func(h *Handler) { h.maxTemplates = n } }

// WithMaxBody bounds the body of a review (DefaultMaxBody); a larger one is answered 413.
func WithMaxBody(n int64) Option { return func(h *Handler) { h.maxBody = n } }

// defaultExempt are the namespaces no pod of which is converted by default.
func defaultExempt() []string { return []string{metav1.NamespaceSystem} }
