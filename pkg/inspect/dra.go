package inspect

import (
	"context"
	"fmt"
	"slices"

	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/cache/feed"
	"github.com/gpushare/gpushare/pkg/contract"
)

// DefaultDRADriver is the DRA driver whose devices are read by default: the name share-plugin
// --mode=dra and extender --dra-driver use by default.
const DefaultDRADriver = "gpushare.aliyun.com"

// ModeDRA is NodeReport.Mode of a node whose cards come from the DRA driver's ResourceSlices.
const ModeDRA = "dra"

// DRAObjects are the driver's ResourceSlices and the ResourceClaims a report charges to its
// cards; both are empty where the API server does not serve resource.k8s.io/v1 or the user may
// not list them.
type DRAObjects struct {
	// Slices are the driver's slices (of the named nodes, when nodes are named).
	Slices []resourceapi.ResourceSlice
	// Claims are the claims (holding cards of the named nodes, when nodes are named).
	Claims []resourceapi.ResourceClaim
}

// FetchDRA reads the driver's ResourceSlices and every ResourceClaim when the API server serves
// resource.k8s.io/v1. Without node names it lists the driver's slices and all claims; with node
// names it lists each node's slices of the driver and keeps the claims holding its devices
// (claims cannot be selected by node on the server). A cluster without resource.k8s.io/v1, or
// a user who may not list slices or claims, gets no DRA objects and no error: the report is
// then what it is without DRA.
func FetchDRA(ctx context.Context, client kubernetes.Interface, driver string, nodeNames []string) (DRAObjects, error) {
	logger := klog.FromContext(ctx)
	served, err := servesDRA(ctx, client)
	if err != nil || !served {
		return DRAObjects{}, err
	}
	var objs DRAObjects
	if objs.Slices, err = listDriverSlices(ctx, client, driver, nodeNames); err == nil {
		objs.Claims, err = listClaims(ctx, client)
	}
	if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) {
		logger.V(2).Info("Not showing DRA nodes: cannot list ResourceSlices or ResourceClaims", "err", err)
		return DRAObjects{}, nil
	}
	if err != nil {
		return DRAObjects{}, err
	}
	if len(nodeNames) > 0 {
		objs.Claims = slices.DeleteFunc(objs.Claims, func(c resourceapi.ResourceClaim) bool {
			return !holdsDevicesOf(&c, driver, nodeNames)
		})
	}
	return objs, nil
}

// servesDRA reports whether the API server serves ResourceSlices and ResourceClaims in
// resource.k8s.io/v1; a group version it does not know (or may not tell) is not served.
func servesDRA(ctx context.Context, client kubernetes.Interface) (bool, error) {
	gv := resourceapi.SchemeGroupVersion.String()
	list, err := discovery.ToServerResourcesInterfaceWithContext(client.Discovery()).ServerResourcesForGroupVersionWithContext(ctx, gv)
	if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
		klog.FromContext(ctx).V(2).Info("Not showing DRA nodes: the API server does not serve it", "groupVersion", gv, "err", err)
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("discover %s: %w", gv, err)
	}
	var slicesServed, claimsServed bool
	for _, r := range list.APIResources {
		slicesServed = slicesServed || r.Name == "resourceslices"
		claimsServed = claimsServed || r.Name == "resourceclaims"
	}
	return slicesServed && claimsServed, nil
}

// listDriverSlices lists the driver's slices, of each named node when nodes are named. The
// node is checked here too, as the feed files slices, so the result does not depend on the
// server applying the field selector.
func listDriverSlices(ctx context.Context, client kubernetes.Interface, driver string, nodeNames []string) ([]resourceapi.ResourceSlice, error) {
	byDriver := fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorDriver, driver)
	if len(nodeNames) == 0 {
		return listSlices(ctx, client, byDriver.String())
	}
	var out []resourceapi.ResourceSlice
	for _, name := range nodeNames {
		sel := fields.AndSelectors(byDriver, fields.OneTermEqualSelector(resourceapi.ResourceSliceSelectorNodeName, name))
		more, err := listSlices(ctx, client, sel.String())
		if err != nil {
			return nil, err
		}
		out = append(out, slices.DeleteFunc(more, func(s resourceapi.ResourceSlice) bool {
			return feed.DRASliceNode(&s, driver) != name
		})...)
	}
	return out, nil
}

// listSlices lists the ResourceSlices matching selector, pageSize a page.
func listSlices(ctx context.Context, client kubernetes.Interface, selector string) ([]resourceapi.ResourceSlice, error) {
	var out []resourceapi.ResourceSlice
	opts := metav1.ListOptions{FieldSelector: selector, Limit: pageSize}
	for {
		list, err := client.ResourceV1().ResourceSlices().List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list resourceslices %s: %w", selector, err)
		}
		out = append(out, list.Items...)
		if opts.Continue = list.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}

// listClaims lists the ResourceClaims of all namespaces, pageSize a page.
func listClaims(ctx context.Context, client kubernetes.Interface) ([]resourceapi.ResourceClaim, error) {
	var out []resourceapi.ResourceClaim
	opts := metav1.ListOptions{Limit: pageSize}
	for {
		list, err := client.ResourceV1().ResourceClaims(metav1.NamespaceAll).List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list resourceclaims in all namespaces: %w", err)
		}
		out = append(out, list.Items...)
		if opts.Continue = list.Continue; opts.Continue == "" {
			return out, nil
		}
	}
}

// holdsDevicesOf reports whether claim is allocated a device of driver on one of nodes (the
// driver names each node's pool after the node, as the feed charges claims).
func holdsDevicesOf(claim *resourceapi.ResourceClaim, driver string, nodes []string) bool {
	if claim.Status.Allocation == nil {
		return false
	}
	return slices.ContainsFunc(claim.Status.Allocation.Devices.Results, func(r resourceapi.DeviceRequestAllocationResult) bool {
		return r.Driver == driver && slices.Contains(nodes, r.Pool)
	})
}

// FeedDRA hands objs to c through the extender's DRA feed, so that DRA nodes get the cards the
// extender sees and claims are charged as it charges them: the slices first, so that each
// claim finds its devices.
func FeedDRA(ctx context.Context, c cache.Cache, driver string, names contract.Names, objs DRAObjects) {
	f := feed.NewDRAFeed(c, driver, names, klog.FromContext(ctx))
	for i := range objs.Slices {
		f.SetSlice(&objs.Slices[i])
	}
	for i := range objs.Claims {
		f.SetClaim(&objs.Claims[i])
	}
}
