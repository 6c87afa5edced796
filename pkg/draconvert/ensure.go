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

// TemplateEnsurer makes the claim templates of conversions exist through the API server.
type TemplateEnsurer struct {
	client kubernetes.Interface
}

// NewTemplateEnsurer returns an ensurer that reads and creates templates with client.
func NewTemplateEnsurer(client kubernetes.Interface) *TemplateEnsurer {
	return &TemplateEnsurer{client: client}
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

// ensure makes one template exist: get, else create, else (created meanwhile) get again.
func (e *TemplateEnsurer) ensure(ctx context.Context, namespace string, want *resourcev1.ResourceClaimTemplate) error {
	api := e.client.ResourceV1().ResourceClaimTemplates(namespace)
	got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
	if err == nil {
		return sameSpec(want, got)
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading ResourceClaimTemplate %s/%s: %w", namespace, want.Name, err)
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

// sameSpec refuses got unless its spec is want's.
func sameSpec(want, got *resourcev1.ResourceClaimTemplate) error {
	if apiequality.Semantic.DeepEqual(want.Spec, got.Spec) {
		return nil
	}
	return fmt.Errorf("%w: ResourceClaimTemplate %s/%s does not ask what its name says to gpushare (gpushare names its templates after their spec); "+
		"delete it and create the pod again", ErrTemplateConflict, got.Namespace, got.Name)
}
