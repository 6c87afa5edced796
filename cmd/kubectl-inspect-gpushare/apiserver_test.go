package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

// fakeAPIServer serves the few read-only core/v1 endpoints the plugin uses from fixture objects:
// node list and get, and pod lists across namespaces with field selectors and paging (limit and
// continue), as a real API server does; with dra, also resource.k8s.io/v1 (see
// apiserver_dra_test.go). It records every request.
type fakeAPIServer struct {
	nodes      []v1.Node
	pods       []v1.Pod
	forbidPods bool
	dra        bool
	slices     []resourceapi.ResourceSlice
	claims     []resourceapi.ResourceClaim

	mu       sync.Mutex // guards requests
	requests []string
}

func newFakeAPIServer(t *testing.T, objs []runtime.Object, forbidPods, dra bool) (*fakeAPIServer, *httptest.Server) {
	t.Helper()
	s := &fakeAPIServer{forbidPods: forbidPods, dra: dra}
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.Node:
			s.nodes = append(s.nodes, *o)
		case *v1.Pod:
			s.pods = append(s.pods, *o)
		case *resourceapi.ResourceSlice:
			s.slices = append(s.slices, *o)
		case *resourceapi.ResourceClaim:
			s.claims = append(s.claims, *o)
		}
	}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

// Requests returns the recorded "METHOD path?query" lines.
func (s *fakeAPIServer) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.requests...)
}

func (s *fakeAPIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests = append(s.requests, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	s.mu.Unlock()
	switch {
	case r.URL.Path == "/version":
		writeJSON(w, http.StatusOK, map[string]string{"major": "1", "minor": "37", "gitVersion": "v1.37.1"})
	case r.URL.Path == "/api/v1/nodes":
		s.listNodes(w, r)
	case strings.HasPrefix(r.URL.Path, "/api/v1/nodes/"):
		s.getNode(w, strings.TrimPrefix(r.URL.Path, "/api/v1/nodes/"))
	case r.URL.Path == "/api/v1/pods" && s.forbidPods:
		writeStatus(w, http.StatusForbidden, metav1.StatusReasonForbidden,
			`pods is forbidden: User "viewer" cannot list resource "pods" in API group "" at the cluster scope`)
	case r.URL.Path == "/api/v1/pods":
		s.listPods(w, r)
	case s.dra && strings.HasPrefix(r.URL.Path, draPrefix):
		s.serveDRA(w, r)
	default:
		writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, "no such path "+r.URL.Path)
	}
}

func (s *fakeAPIServer) listNodes(w http.ResponseWriter, r *http.Request) {
	items := append([]v1.Node(nil), s.nodes...)
	start, end, next := page(r, len(items))
	list := v1.NodeList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "NodeList"}, Items: items[start:end]}
	list.Continue = next
	writeJSON(w, http.StatusOK, list)
}

func (s *fakeAPIServer) getNode(w http.ResponseWriter, name string) {
	for i := range s.nodes {
		if s.nodes[i].Name == name {
			n := s.nodes[i]
			n.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Node"}
			writeJSON(w, http.StatusOK, n)
			return
		}
	}
	writeStatus(w, http.StatusNotFound, metav1.StatusReasonNotFound, `nodes "`+name+`" not found`)
}

func (s *fakeAPIServer) listPods(w http.ResponseWriter, r *http.Request) {
	sel, err := fields.ParseSelector(r.URL.Query().Get("fieldSelector"))
	if err != nil {
		writeStatus(w, http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
		return
	}
	var items []v1.Pod
	for _, p := range s.pods {
		if sel.Matches(fields.Set{"spec.nodeName": p.Spec.NodeName, "status.phase": string(p.Status.Phase)}) {
			items = append(items, p)
		}
	}
	start, end, next := page(r, len(items))
	list := v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: items[start:end]}
	list.Continue = next
	writeJSON(w, http.StatusOK, list)
}

// page serves at most min(limit, 2) items from the continue token's offset, so that every
// client list takes several pages.
func page(r *http.Request, n int) (start, end int, next string) {
	start, _ = strconv.Atoi(r.URL.Query().Get("continue"))
	size := 2
	if l, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && l > 0 {
		size = min(size, l)
	}
	start = min(start, n)
	end = min(start+size, n)
	if end < n {
		next = strconv.Itoa(end)
	}
	return start, end, next
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client sees a truncated body if this fails
}

func writeStatus(w http.ResponseWriter, code int32, reason metav1.StatusReason, msg string) {
	writeJSON(w, int(code), metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg})
}

// unescape decodes a query value; an undecodable one is returned as is.
func unescape(v string) string {
	if s, err := url.QueryUnescape(v); err == nil {
		return s
	}
	return v
}
