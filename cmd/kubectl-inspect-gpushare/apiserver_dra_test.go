package main

import (
	"net/http"
	"strings"

	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
)

// draPrefix is the path of resource.k8s.io/v1.
const draPrefix = "/apis/resource.k8s.io/v1"

// serveDRA serves resource.k8s.io/v1 as a real API server does for the plugin: its discovery
// document, ResourceSlice lists with the spec.driver and spec.nodeName field selectors, and
// ResourceClaim lists across namespaces, paged.
func (s *fakeAPIServer) serveDRA(w http.ResponseWriter, r *http.Request) {
	switch strings.TrimPrefix(r.URL.Path, draPrefix) {
	case "":
		writeJSON(w, http.StatusOK, metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: resourceapi.SchemeGroupVersion.String(), APIResources: []metav1.APIResource{
				{Name: "resourceslices", Kind: "ResourceSlice", Verbs: metav1.Verbs{"get", "list", "watch"}},
				{Name: "resourceclaims", Namespaced: true, Kind: "ResourceClaim", Verbs: metav1.Verbs{"get", "list", "watch"}},
			}})
	case "/resourceslices":
		s.listSlices(w, r)
	case "/resourceclaims":
		start, end, next := page(r, len(s.claims))
		list := resourceapi.ResourceClaimList{TypeMeta: metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceClaimList"},
			Items: s.claims[start:end]}
		list.Continue = next
		writeJSON(w, http.StatusOK, list)
	default:
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "no such path "+r.URL.Path)
	}
}

func (s *fakeAPIServer) listSlices(w http.ResponseWriter, r *http.Request) {
	sel, err := fields.ParseSelector(r.URL.Query().Get("fieldSelector"))
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	var items []resourceapi.ResourceSlice
	for _, sl := range s.slices {
		node := ""
		if sl.Spec.NodeName != nil {
			node = *sl.Spec.NodeName
		}
		if sel.Matches(fields.Set{resourceapi.ResourceSliceSelectorDriver: sl.Spec.Driver, resourceapi.ResourceSliceSelectorNodeName: node}) {
			items = append(items, sl)
		}
	}
	start, end, next := page(r, len(items))
	list := resourceapi.ResourceSliceList{TypeMeta: metav1.TypeMeta{APIVersion: resourceapi.SchemeGroupVersion.String(), Kind: "ResourceSliceList"},
		Items: items[start:end]}
	list.Continue = next
	writeJSON(w, http.StatusOK, list)
}
