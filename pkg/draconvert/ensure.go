package draconvert

import (
	"context"
	"errors"
	"fmt"

	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// FieldManager is the field manager of the claim templates the conversion creates.
const FieldManager = "gpushare-dra-webhook"

// ErrTemplateConflict: a claim template of the name the conversion gives a spec exists with
// another spec. The conversion never reuses it: the pod would get what that spec asks.
var ErrTemplateConflict = errors.New("claim template exists with another spec")

// ErrTooManyTemplates: the namespace holds the most claim templates of the conversion allowed
// (TemplateEnsurer's max), and an ask of another shape would create one more.
var ErrTooManyTemplates = errors.New("too many gpushare claim templates in the namespace")

// DefaultMaxTemplates bounds the claim templates the conversion creates in one namespace. A
// template is named after its ask's shape (memory per card, cards, models, compute cap), so a
// namespace's workloads need a handful; the bound keeps a caller of the webhook, which the API
// server calls without a client certificate, from filling etcd with shapes of its choosing.
const DefaultMaxTemplates = 128

// TemplateEnsurer makes the claim templates of conversions exist through the API server.
type TemplateEnsurer struct {
	client kubernetes.Interface
	max    int
}

// NewTemplateEnsurer returns an ensurer that reads and creates templates with client, at most
// max (DefaultMaxTemplates when max <= 0) of the conversion's in one namespace.
func NewTemplateEnsurer(client kubernetes.Interface, max int) *TemplateEnsurer {
	if max <= 0 {
		max = DefaultMaxTemplates
	}
	return &TemplateEnsurer{client: client, max: max}
}

// Ensure makes each template exist in namespace: an existing one of the same name and spec is
// reused, a missing one created (one created meanwhile by another admission is fine), and one
// of the same name with another spec is refused with ErrTemplateConflict. It stops at the
// first error. The templates it created before that stay: each is whole and named after its
// spec, so a retry or another pod reuses it, and no pod is admitted naming one that is missing.
func (e *TemplateEnsurer) Ensure(ctx context.Context, namespace string, templates []*resourcev1.ResourceClaimTemplate) error {
	for _, t := range templates {
		if err := e.ensure(ctx, namespace, t); err != nil {
			return err
		}
	}
	return nil
}

// Check is Ensure for a dry run: it reads the templates and refuses one of another spec, as
// Ensure would, but creates none.
func (e *TemplateEnsurer) Check(ctx context.Context, namespace string, templates []*resourcev1.ResourceClaimTemplate) error {
	for _, t := range templates {
		got, err := e.client.ResourceV1().ResourceClaimTemplates(namespace).Get(ctx, t.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return fmt.Errorf("reading ResourceClaimTemplate %s/%s: %w", namespace, t.Name, err)
		}
		if err := sameSpec(t, got); err != nil {
			return err
		}
	}
	return nil
}

// ensure makes one template exist: get, else (room left in the namespace) create, else
// (created meanwhile) get again.
func (e *TemplateEnsurer) ensure(ctx context.Context, namespace string, want *resourcev1.ResourceClaimTemplate) error {
	api := e.client.ResourceV1().ResourceClaimTemplates(namespace)
	got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
	if err == nil {
		return sameSpec(want, got)
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading ResourceClaimTemplate %s/%s: %w", namespace, want.Name, err)
	}
	if err := e.checkRoom(ctx, namespace, want.Name); err != nil {
		return err
	}
	create := want.DeepCopy()
	create.Namespace = namespace
	_, err = api.Create(ctx, create, metav1.CreateOptions{FieldManager: FieldManager})
	switch {
	case err == nil:
		return nil
	case !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("creating ResourceClaimTemplate %s/%s: %w", namespace, want.Name, err)
	}
	if got, err = api.Get(ctx, want.Name, metav1.GetOptions{}); err != nil {
		return fmt.Errorf("reading ResourceClaimTemplate %s/%s after another created it: %w", namespace, want.Name, err)
	}
	return sameSpec(want, got)
}

// checkRoom refuses to create template name when the namespace holds max of the conversion's
// templates already. Two admissions at once may both pass it: the bound can be exceeded by
// the concurrent creations, not more.
func (e *TemplateEnsurer) checkRoom(ctx context.Context, namespace, name string) error {
	list, err := e.client.ResourceV1().ResourceClaimTemplates(namespace).List(ctx, metav1.ListOptions{
		LabelSelector: ManagedByLabel + "=" + ManagedBy, Limit: int64(e.max)})
	if err != nil {
		return fmt.Errorf("counting the claim templates of namespace %s: %w", namespace, err)
	}
	if len(list.Items) >= e.max {
		return fmt.Errorf("%w: %s holds %d or more (labelled %s=%s), the most allowed; ResourceClaimTemplate %s would be one more: "+
			"delete the ones no pod uses, or raise the extender's --dra-max-templates", ErrTooManyTemplates, namespace, e.max, ManagedByLabel, ManagedBy, name)
	}
	return nil
}

// sameSpec refuses got unless its spec is want's.
func sameSpec(want, got *resourcev1.ResourceClaimTemplate) error {
	if apiequality.Semantic.DeepEqual(want.Spec, got.Spec) {
		return nil
	}
	return fmt.Errorf("%w: ResourceClaimTemplate %s/%s does not ask what its name says to gpushare (gpushare names its templates after their spec); "+
		"delete it and create the pod again", ErrTemplateConflict, got.Namespace, got.Name)
}
