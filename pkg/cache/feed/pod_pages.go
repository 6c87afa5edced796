package feed

import (
	"context"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	resourceclient "k8s.io/client-go/kubernetes/typed/resource/v1"
)

// PodPageSize is how many pods one page of EachPodPage holds (client-go's pager default).
const PodPageSize = 500

// EachPodPage lists the pods that opts' selectors match at the newest resource version,
// PodPageSize a page, and calls fn with each page in turn before it reads the next; it returns
// the list's resource version. A whole list of tens of thousands of pods, decoded, is hundreds
// of megabytes; a page is garbage once fn is done with it (fn must copy a pod it keeps: the
// page's array would stay alive with it). The API server's "0" (its watch cache, any version)
// is not used: it answers in one piece. A list call's error is returned as the client gives it,
// for the caller to say what it was listing; fn's as fn gives it.
func EachPodPage(ctx context.Context, pods corev1client.PodInterface, opts metav1.ListOptions, fn func([]v1.Pod) error) (string, error) {
	return eachPage(ctx, opts, pods.List, func(l *v1.PodList) ([]v1.Pod, *metav1.ListMeta) { return l.Items, &l.ListMeta }, fn)
}

// EachNodePage is EachPodPage for nodes: a node with its image list is several kilobytes, and
// an audit of thousands of them need not hold them all.
func EachNodePage(ctx context.Context, nodes corev1client.NodeInterface, opts metav1.ListOptions, fn func([]v1.Node) error) (string, error) {
	return eachPage(ctx, opts, nodes.List, func(l *v1.NodeList) ([]v1.Node, *metav1.ListMeta) { return l.Items, &l.ListMeta }, fn)
}

// EachSlicePage is EachPodPage for ResourceSlices (an audit in DRA mode).
func EachSlicePage(ctx context.Context, slices resourceclient.ResourceSliceInterface, opts metav1.ListOptions, fn func([]resourceapi.ResourceSlice) error) (string, error) {
	return eachPage(ctx, opts, slices.List, func(l *resourceapi.ResourceSliceList) ([]resourceapi.ResourceSlice, *metav1.ListMeta) {
		return l.Items, &l.ListMeta
	}, fn)
}

// EachClaimPage is EachPodPage for ResourceClaims (an audit in DRA mode).
func EachClaimPage(ctx context.Context, claims resourceclient.ResourceClaimInterface, opts metav1.ListOptions, fn func([]resourceapi.ResourceClaim) error) (string, error) {
	return eachPage(ctx, opts, claims.List, func(l *resourceapi.ResourceClaimList) ([]resourceapi.ResourceClaim, *metav1.ListMeta) {
		return l.Items, &l.ListMeta
	}, fn)
}

// eachPage reads a list PodPageSize objects a page through list and calls fn with each page's
// items.
func eachPage[L any, T any](ctx context.Context, opts metav1.ListOptions, list func(context.Context, metav1.ListOptions) (L, error),
	items func(L) ([]T, *metav1.ListMeta), fn func([]T) error) (string, error) {
	page := metav1.ListOptions{LabelSelector: opts.LabelSelector, FieldSelector: opts.FieldSelector, Limit: PodPageSize}
	var rv string
	for {
		l, err := list(ctx, page)
		if err != nil {
			return "", err
		}
		objs, meta := items(l)
		if rv == "" {
			rv = meta.ResourceVersion
		}
		if err := fn(objs); err != nil {
			return "", err
		}
		if meta.Continue == "" {
			return rv, nil
		}
		page.Continue = meta.Continue
	}
}
