package scheduler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/placement/policies"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
	"github.com/gpushare/gpushare/pkg/scheduler/wire"
	"github.com/gpushare/gpushare/pkg/version"
)

// errorBody is the JSON of every error answer.
type errorBody = server.ErrorBody

// testBodyLimit is the request body limit of the handlers under test: room for a few full
// Node objects.
const testBodyLimit = 16 << 10

// fixedNow is the clock of the extenders under test, so assume-time annotations are stable.
func fixedNow() time.Time { return time.Unix(1700000000, 0) }

// fakeAPIWithBinding returns a fake clientset holding objs whose pods/binding subresource
// behaves like the API server's: it sets spec.nodeName and copies the Binding's annotations onto
// the pod in one update, and answers 409 Conflict for a pod
// that is already bound or whose UID differs from the Binding's. (The plain fake only records
// the action and leaves the pod unbound.)
func fakeAPIWithBinding(objs ...runtime.Object) *fake.Clientset {
	api := fake.NewClientset(objs...)
	gvr := v1.SchemeGroupVersion.WithResource("pods")
	api.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(clienttesting.CreateAction)
		if !ok || a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b, ok := ca.GetObject().(*v1.Binding)
		if !ok {
			return true, nil, fmt.Errorf("binding action carries a %T", ca.GetObject())
		}
		obj, err := api.Tracker().Get(gvr, b.Namespace, b.Name)
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*v1.Pod).DeepCopy()
		gr := gvr.GroupResource()
		switch {
		case b.UID != "" && b.UID != pod.UID:
			return true, nil, apierrors.NewConflict(gr, b.Name, fmt.Errorf("UID %s does not match %s", b.UID, pod.UID))
		case pod.Spec.NodeName != "":
			return true, nil, apierrors.NewConflict(gr, b.Name, fmt.Errorf("pod %s is already assigned to node %q", b.Name, pod.Spec.NodeName))
		}
		pod.Spec.NodeName = b.Target.Name
		if len(b.Annotations) > 0 && pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		for k, v := range b.Annotations {
			pod.Annotations[k] = v
		}
		return true, nil, api.Tracker().Update(gvr, pod, b.Namespace)
	})
	return api
}

// extenderOn returns a binpack extender whose cache holds nodes and the bound pods among pods,
// and whose fake API holds pods; the clock is fixedNow.
func extenderOn(logger klog.Logger, nodes []*v1.Node, pods []*v1.Pod, opts ...Option) (*Extender, *fake.Clientset) {
	objs := make([]runtime.Object, 0, len(pods))
	c := cache.New(contract.DefaultNames(), logger)
	for _, n := range nodes {
		c.SetNode(n)
	}
	for _, p := range pods {
		objs = append(objs, p)
		c.SetPod(p)
	}
	api := fakeAPIWithBinding(objs...)
	return NewExtender(c, api, placement.Binpack{}, contract.DefaultNames(), append([]Option{WithClock(fixedNow)}, opts...)...), api
}

// routeFixture is the state the route tests run on:
//
//	n1: 16+16 GiB, empty            n2: 8 GiB, pod "busy" holds 6
//	n3: 16 GiB, unhealthy           n4: 8 GiB, pod "half" holds 2
//
// and a pending pod "p" asking 4 GiB. "ghost" is a node the extender does not know.
func routeFixture() ([]*v1.Node, []*v1.Pod) {
	nodes := []*v1.Node{
		st.MakeNode("n1").GPUs(16, 16).Obj(),
		st.MakeNode("n2").GPUs(8).Obj(),
		st.MakeNode("n3").GPUs(16).Unhealthy(0).Obj(),
		st.MakeNode("n4").GPUs(8).Obj(),
	}
	pods := []*v1.Pod{
		st.MakePod().Name("p").GPUMem(4).Obj(),
		st.MakePod().Name("busy").GPUMem(6).Node("n2").Placement(`{"0":{"0":6}}`).Obj(),
		st.MakePod().Name("half").GPUMem(2).Node("n4").Placement(`{"0":{"0":2}}`).Obj(),
	}
	return nodes, pods
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode %T: %v", v, err)
	}
	return string(raw)
}

// decodeErr is the error encoding/json gives for body decoded into v, which the handlers
// report after "malformed <path> request: ".
func decodeErr(body string, v any) string {
	err := json.NewDecoder(strings.NewReader(body)).Decode(v)
	if err == nil {
		return "<no error>"
	}
	return err.Error()
}

// argsErr is the error of wire.DecodeArgs for body (wire's tests pin its wording).
func argsErr(body string) string {
	_, err := wire.DecodeArgs([]byte(body))
	return fmt.Sprint(err)
}

// names is a NodeNames value; names() is an empty list, not null.
func names(n ...string) *[]string {
	if n == nil {
		n = []string{}
	}
	return &n
}

// wantNode is a node of routeFixture as the cache shows it: 64 CPUs, 256 GiB, no requests.
func wantNode(name string, gpus []placement.GPUInfo, pods ...placement.PodInfo) *placement.NodeInfo {
	var maxFree int64
	for i := range gpus {
		gpus[i].UUID = fmt.Sprintf("GPU-%s-%d", name, gpus[i].Index)
		gpus[i].Model = "Tesla T4"
		if gpus[i].Healthy {
			maxFree = max(maxFree, gpus[i].Capacity-gpus[i].Used)
		}
	}
	return &placement.NodeInfo{Name: name, Inventory: placement.FromAnnotation, GPUs: gpus, Pods: pods, MaxFree: maxFree,
		AllocatableMilliCPU: 64000, AllocatableMemory: 256 << 30}
}

func boundPod(name, node string, units int64) placement.PodInfo {
	return placement.PodInfo{Namespace: "default", Name: name, UID: types.UID("uid-" + name), Node: node, State: placement.PodBound,
		Units: units, Allocation: contract.Allocation{"0": {0: units}}}
}

// routeCase is one request to the handler on a fresh routeFixture.
type routeCase struct {
	name     string
	method   string
	path     string
	body     string
	notReady bool
	// wantStatus and wantType are the answer's status and Content-Type.
	wantStatus int
	wantType   string
	// want is the decoded JSON answer (its type says what to decode into), or a string for a
	// text answer.
	want any
	// wantPod, if set, is pod "p" as the API holds it afterwards (name, node, annotations).
	wantPod *v1.Pod
}

func TestHandlerRoutes(t *testing.T) {
	const jsonType = "application/json"
	const pre = Prefix
	pod := st.MakePod().Name("p").GPUMem(4).Obj()
	fixtureNodes, _ := routeFixture()
	filterArgs := func(n ...string) string {
		return mustJSON(t, extenderv1.ExtenderArgs{Pod: pod, NodeNames: names(n...)})
	}
	oversize := `{"NodeNames":["` + strings.Repeat("a", 2*testBodyLimit) + `"]}`
	malformed := func(path, detail string) errorBody {
		return errorBody{Error: "malformed " + path + " request: " + detail}
	}
	tooLarge := func(path, body string) errorBody {
		return errorBody{Error: fmt.Sprintf("%s: a body of %d bytes is larger than the %d the extender accepts (--max-body-bytes)", path, len(body), testBodyLimit)}
	}
	oversizeBind := `{"PodName":"` + strings.Repeat("p", 2*testBodyLimit) + `"}`
	n2, n3, n4 := "GPU memory: no GPU has 4 GiB free",
		"GPU memory: all GPUs of the node are unhealthy",
		"GPU memory: node is not a GPU-sharing node known to the extender"
	tests := []routeCase{
		{
			name: "filter with NodeNames answers in NodeNames", method: http.MethodPost, path: pre + "/filter",
			body: filterArgs("n1", "n2", "n3", "n4", "ghost"), wantStatus: http.StatusOK, wantType: jsonType,
			want: extenderv1.ExtenderFilterResult{
				NodeNames:                  names("n1", "n4"),
				FailedNodes:                extenderv1.FailedNodesMap{"n2": n2},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{"n3": n3, "ghost": n4},
			},
		},
		{
			name: "filter with NodeNames where none fits answers an empty list", method: http.MethodPost, path: pre + "/filter",
			body: filterArgs("n2"), wantStatus: http.StatusOK, wantType: jsonType,
			want: extenderv1.ExtenderFilterResult{
				NodeNames: names(), FailedNodes: extenderv1.FailedNodesMap{"n2": n2},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
			},
		},
		{
			name: "filter with full Nodes answers in Nodes", method: http.MethodPost, path: pre + "/filter",
			body: mustJSON(t, extenderv1.ExtenderArgs{Pod: pod, Nodes: &v1.NodeList{Items: []v1.Node{
				*fixtureNodes[0], *fixtureNodes[1], *fixtureNodes[3]}}}),
			wantStatus: http.StatusOK, wantType: jsonType,
			want: extenderv1.ExtenderFilterResult{
				Nodes:                      &v1.NodeList{Items: []v1.Node{*fixtureNodes[0], *fixtureNodes[3]}},
				FailedNodes:                extenderv1.FailedNodesMap{"n2": n2},
				FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{},
			},
		},
		{
			name: "filter without a pod answers an error in the result", method: http.MethodPost, path: pre + "/filter",
			body: `{"NodeNames":["n1"]}`, wantStatus: http.StatusOK, wantType: jsonType,
			want: extenderv1.ExtenderFilterResult{Error: "filter: request has no pod",
				FailedNodes: extenderv1.FailedNodesMap{}, FailedAndUnresolvableNodes: extenderv1.FailedNodesMap{}},
		},
		{
			name: "filter with a closing bracket after the JSON value is a 400 (found by FuzzHandler)", method: http.MethodPost, path: pre + "/filter",
			body: `{}}0`, wantStatus: http.StatusBadRequest, wantType: jsonType,
			want: errorBody{Error: "malformed " + pre + "/filter request: unexpected data after the JSON value"},
		},
		{
			name: "filter with data after the JSON value is a 400", method: http.MethodPost, path: pre + "/filter",
			body: `{"NodeNames":[]} {"NodeNames":["n1"]}`, wantStatus: http.StatusBadRequest, wantType: jsonType,
			want: errorBody{Error: "malformed " + pre + "/filter request: unexpected data after the JSON value"},
		},
		{
			name: "filter with garbage JSON is a 400", method: http.MethodPost, path: pre + "/filter",
			body: `{"Pod": garbage`, wantStatus: http.StatusBadRequest, wantType: jsonType,
			want: malformed(pre+"/filter", argsErr(`{"Pod": garbage`)),
		},
		{
			name: "filter with a body of the wrong shape is a 400", method: http.MethodPost, path: pre + "/filter",
			body: `{"NodeNames":"n1"}`, wantStatus: http.StatusBadRequest, wantType: jsonType,
			want: malformed(pre+"/filter", argsErr(`{"NodeNames":"n1"}`)),
		},
		{
			name: "filter with an empty body is a 400", method: http.MethodPost, path: pre + "/filter",
			wantStatus: http.StatusBadRequest, wantType: jsonType, want: malformed(pre+"/filter", "EOF"),
		},
		{
			name: "filter with an oversize body is a 413", method: http.MethodPost, path: pre + "/filter",
			body: oversize, wantStatus: http.StatusRequestEntityTooLarge, wantType: jsonType,
			want: tooLarge(pre+"/filter", oversize),
		},
		{
			name: "prioritize scores the nodes in the order given", method: http.MethodPost, path: pre + "/prioritize",
			body: filterArgs("n1", "n2", "n4", "ghost"), wantStatus: http.StatusOK, wantType: jsonType,
			want: extenderv1.HostPriorityList{{Host: "n1", Score: 0}, {Host: "n2", Score: 0}, {Host: "n4", Score: 10}, {Host: "ghost", Score: 0}},
		},
		{
			name: "prioritize without a pod is a 400", method: http.MethodPost, path: pre + "/prioritize",
			body: `{"NodeNames":["n1"]}`, wantStatus: http.StatusBadRequest, wantType: jsonType,
			want: errorBody{Error: "prioritize: request has no pod"},
		},
		{
			name: "prioritize with garbage JSON is a 400", method: http.MethodPost, path: pre + "/prioritize",
			body: `[1,2`, wantStatus: http.StatusBadRequest, wantType: jsonType,
			want: malformed(pre+"/prioritize", argsErr(`[1,2`)),
		},
		{
			name: "prioritize with an oversize body is a 413", method: http.MethodPost, path: pre + "/prioritize",
			body: oversize, wantStatus: http.StatusRequestEntityTooLarge, wantType: jsonType,
			want: tooLarge(pre+"/prioritize", oversize),
		},
		{
			name: "bind places, annotates and binds the pod", method: http.MethodPost, path: pre + "/bind",
			body:       mustJSON(t, extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "default", PodUID: "uid-p", Node: "n1"}),
			wantStatus: http.StatusOK, wantType: jsonType, want: extenderv1.ExtenderBindingResult{},
			wantPod: st.MakePod().Name("p").GPUMem(4).Node("n1").
				Annotation(contract.AnnotationIndex, "0").Annotation(contract.AnnotationPod, "4").
				Annotation(contract.AnnotationDev, "16").Annotation(contract.AnnotationAssigned, "false").
				Annotation(contract.AnnotationAssumeTime, "1700000000000000000").Placement(`{"0":{"0":4}}`).Obj(),
		},
		{
			name: "filter before the cache synced is a 503", method: http.MethodPost, path: pre + "/filter", notReady: true,
			body: filterArgs("n1", "n2"), wantStatus: http.StatusServiceUnavailable, wantType: jsonType,
			want: errorBody{Error: pre + "/filter: " + server.ErrNotSynced.Error()},
		},
		{
			name: "bind before the cache synced is a 503 and leaves the pod alone", method: http.MethodPost, path: pre + "/bind", notReady: true,
			body:       mustJSON(t, extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "default", PodUID: "uid-p", Node: "n1"}),
			wantStatus: http.StatusServiceUnavailable, wantType: jsonType,
			want:    errorBody{Error: pre + "/bind: " + server.ErrNotSynced.Error()},
			wantPod: pod,
		},
		{
			name: "bind to a node where the pod does not fit answers the reason and leaves the pod alone", method: http.MethodPost, path: pre + "/bind",
			body:       mustJSON(t, extenderv1.ExtenderBindingArgs{PodName: "p", PodNamespace: "default", PodUID: "uid-p", Node: "n2"}),
			wantStatus: http.StatusOK, wantType: jsonType,
			want:    extenderv1.ExtenderBindingResult{Error: "bind default/p to n2: GPU memory: largest free block 2 GiB on GPU0, pod needs 4 GiB"},
			wantPod: pod,
		},
		{
			name: "bind of an unknown pod answers the error in the result", method: http.MethodPost, path: pre + "/bind",
			body:       mustJSON(t, extenderv1.ExtenderBindingArgs{PodName: "nope", PodNamespace: "default", Node: "n1"}),
			wantStatus: http.StatusOK, wantType: jsonType,
			want: extenderv1.ExtenderBindingResult{Error: `bind default/nope: get pod: pods "nope" not found`},
		},
		{
			name: "bind without a node is a 400", method: http.MethodPost, path: pre + "/bind",
			body: `{"PodName":"p","PodNamespace":"default"}`, wantStatus: http.StatusBadRequest, wantType: jsonType,
			want:    errorBody{Error: "malformed bind request: podName, podNamespace and node are required"},
			wantPod: pod,
		},
		{
			name: "bind with garbage JSON is a 400", method: http.MethodPost, path: pre + "/bind",
			body: `nonsense`, wantStatus: http.StatusBadRequest, wantType: jsonType,
			want: malformed(pre+"/bind", decodeErr(`nonsense`, &extenderv1.ExtenderBindingArgs{})),
		},
		{
			name: "bind with an oversize body is a 413", method: http.MethodPost, path: pre + "/bind",
			body: oversizeBind, wantStatus: http.StatusRequestEntityTooLarge, wantType: jsonType,
			want: tooLarge(pre+"/bind", oversizeBind),
		},
		{
			// The extender preempts for gpu-mem pods itself (preempt_test.go) and leaves kube-scheduler
			// no GPU victims to delete. Here p's 4 GiB fit n4's card now (6 free; n1's are emptier):
			// the card is held for p and no GPU pod is evicted; of kube-scheduler's victims on n4,
			// only uid-other, which holds no gpu-mem (needed for CPU or memory), is passed back.
			name: "preempt leaves kube-scheduler no GPU victims", method: http.MethodPost, path: pre + "/preempt",
			body: mustJSON(t, extenderv1.ExtenderPreemptionArgs{Pod: pod, NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
				"n1": {}, "n2": {Pods: []*extenderv1.MetaPod{{UID: "uid-busy"}}, NumPDBViolations: 1},
				"n3": {}, "n4": {Pods: []*extenderv1.MetaPod{{UID: "uid-other"}, {UID: "uid-half"}}}, "ghost": {},
			}}),
			wantStatus: http.StatusOK, wantType: jsonType,
			want: extenderv1.ExtenderPreemptionResult{NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
				"n4": {Pods: []*extenderv1.MetaPod{{UID: "uid-other"}}},
			}},
		},
		{
			name: "preempt with garbage JSON is a 400", method: http.MethodPost, path: pre + "/preempt",
			body: `{"Pod":{"metadata":7}}`, wantStatus: http.StatusBadRequest, wantType: jsonType,
			want: malformed(pre+"/preempt", decodeErr(`{"Pod":{"metadata":7}}`, &extenderv1.ExtenderPreemptionArgs{})),
		},
		{
			name: "inspect lists every GPU node", method: http.MethodGet, path: pre + "/inspect",
			wantStatus: http.StatusOK, wantType: jsonType,
			want: InspectResult{Unit: "GiB", Nodes: []*placement.NodeInfo{
				wantNode("n1", []placement.GPUInfo{{Index: 0, Capacity: 16, Healthy: true}, {Index: 1, Capacity: 16, Healthy: true}}),
				wantNode("n2", []placement.GPUInfo{{Index: 0, Capacity: 8, Used: 6, Healthy: true}}, boundPod("busy", "n2", 6)),
				wantNode("n3", []placement.GPUInfo{{Index: 0, Capacity: 16}}),
				wantNode("n4", []placement.GPUInfo{{Index: 0, Capacity: 8, Used: 2, Healthy: true}}, boundPod("half", "n4", 2)),
			}},
		},
		{
			name: "inspect of one node", method: http.MethodGet, path: pre + "/inspect/n2",
			wantStatus: http.StatusOK, wantType: jsonType,
			want: *wantNode("n2", []placement.GPUInfo{{Index: 0, Capacity: 8, Used: 6, Healthy: true}}, boundPod("busy", "n2", 6)),
		},
		{
			name: "inspect of an unknown node is a 404", method: http.MethodGet, path: pre + "/inspect/ghost",
			wantStatus: http.StatusNotFound, wantType: jsonType,
			want: errorBody{Error: `node "ghost" is not known to the extender`},
		},
		{
			name: "healthz", method: http.MethodGet, path: "/healthz", notReady: true,
			wantStatus: http.StatusOK, wantType: jsonType, want: map[string]string{"status": "ok"},
		},
		{
			name: "readyz before the informers synced is a 503", method: http.MethodGet, path: "/readyz", notReady: true,
			wantStatus: http.StatusServiceUnavailable, wantType: jsonType,
			want: errorBody{Error: "informers have not synced yet"},
		},
		{
			name: "readyz after the informers synced", method: http.MethodGet, path: "/readyz",
			wantStatus: http.StatusOK, wantType: jsonType, want: map[string]string{"status": "ready"},
		},
		{
			name: "readyz/leader without leader election: the one replica", method: http.MethodGet, path: "/readyz/leader",
			wantStatus: http.StatusOK, wantType: jsonType, want: map[string]string{"status": "ready"},
		},
		{
			name: "version", method: http.MethodGet, path: "/version",
			wantStatus: http.StatusOK, wantType: jsonType,
			want: map[string]string{"version": version.Version, "commit": version.Commit, "policy": "binpack"},
		},
		{
			name: "metrics", method: http.MethodGet, path: "/metrics", // contents: TestHandlerMetricsCount
			wantStatus: http.StatusOK,
		},
		{
			name: "GET on a POST route is a 405 with a JSON error", method: http.MethodGet, path: pre + "/filter",
			wantStatus: http.StatusMethodNotAllowed, wantType: jsonType,
			want: errorBody{Error: "method GET is not allowed on " + pre + "/filter"},
		},
		{
			name: "POST on a GET route is a 405 with a JSON error", method: http.MethodPost, path: pre + "/inspect", body: `{}`,
			wantStatus: http.StatusMethodNotAllowed, wantType: jsonType,
			want: errorBody{Error: "method POST is not allowed on " + pre + "/inspect"},
		},
		{
			name: "an unknown route is a 404 with a JSON error", method: http.MethodPost, path: pre + "/filterz", body: `{}`,
			wantStatus: http.StatusNotFound, wantType: jsonType,
			want: errorBody{Error: "no route " + pre + "/filterz"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			runRoute(t, tc)
		})
	}
}

// TestReadyzLeader: /readyz/leader answers 200 only on a synced replica that leads, while
// /readyz stays 200 on a synced follower (Kubernetes' readiness, rollouts and the Service).
func TestReadyzLeader(t *testing.T) {
	tests := []struct {
		name                      string
		synced, leading           bool
		wantReadyz, wantLeaderURL int
	}{
		{name: "synced leader", synced: true, leading: true, wantReadyz: http.StatusOK, wantLeaderURL: http.StatusOK},
		{name: "synced follower", synced: true, wantReadyz: http.StatusOK, wantLeaderURL: http.StatusServiceUnavailable},
		{name: "leader not synced", leading: true, wantReadyz: http.StatusServiceUnavailable, wantLeaderURL: http.StatusServiceUnavailable},
		{name: "follower not synced", wantReadyz: http.StatusServiceUnavailable, wantLeaderURL: http.StatusServiceUnavailable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			nodes, pods := routeFixture()
			lead := &stubLeadership{}
			lead.leading.Store(tt.leading)
			ext, _ := extenderOn(logger, nodes, pods, WithLeadership(lead))
			srv := httptest.NewServer(NewHandler(ext, func() bool { return tt.synced }, HandlerConfig{MaxBody: testBodyLimit}, logger))
			defer srv.Close()
			if status, _, body := do(t, srv, http.MethodGet, "/readyz", ""); status != tt.wantReadyz {
				t.Errorf("/readyz = %d, want %d; body %s", status, tt.wantReadyz, body)
			}
			status, _, body := do(t, srv, http.MethodGet, "/readyz/leader", "")
			if status != tt.wantLeaderURL {
				t.Errorf("/readyz/leader = %d, want %d; body %s", status, tt.wantLeaderURL, body)
			}
			if tt.synced && !tt.leading && !strings.Contains(string(body), `the leader is \"other\"`) {
				t.Errorf("a follower's /readyz/leader should name the leader; body %s", body)
			}
		})
	}
}

// runRoute serves one request on a fresh routeFixture and checks the answer.
func runRoute(t *testing.T, tc routeCase) {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	nodes, pods := routeFixture()
	ext, api := extenderOn(logger, nodes, pods)
	srv := httptest.NewServer(NewHandler(ext, func() bool { return !tc.notReady }, HandlerConfig{MaxBody: testBodyLimit}, logger))
	defer srv.Close()
	status, ctype, body := do(t, srv, tc.method, tc.path, tc.body)
	if status != tc.wantStatus {
		t.Errorf("status = %d, want %d; body %s", status, tc.wantStatus, body)
	}
	if tc.wantType != "" && ctype != tc.wantType {
		t.Errorf("Content-Type = %q, want %q", ctype, tc.wantType)
	}
	if tc.want != nil {
		if diff := cmp.Diff(tc.want, decodeAs(t, tc.want, body), cmpopts.IgnoreUnexported(placement.NodeInfo{})); diff != "" {
			t.Errorf("answer (-want,+got):\n%s", diff)
		}
	}
	if tc.wantPod != nil {
		got, err := api.CoreV1().Pods("default").Get(t.Context(), tc.wantPod.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get pod: %v", err)
		}
		if diff := cmp.Diff(podView(tc.wantPod), podView(got)); diff != "" {
			t.Errorf("pod in the API (-want,+got):\n%s", diff)
		}
	}
}

// podView is what the route tests check of a pod: name, node and annotations.
func podView(p *v1.Pod) map[string]any {
	ann := map[string]string{}
	for k, v := range p.Annotations {
		ann[k] = v
	}
	return map[string]any{"name": p.Name, "node": p.Spec.NodeName, "annotations": ann}
}

func do(t *testing.T, srv *httptest.Server, method, path, body string) (int, string, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), raw
}

// decodeAs decodes body into a new value of want's type; a string want takes the raw body.
func decodeAs(t *testing.T, want any, body []byte) any {
	t.Helper()
	if _, ok := want.(string); ok {
		return string(body)
	}
	got := reflect.New(reflect.TypeOf(want))
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(got.Interface()); err != nil {
		t.Fatalf("decode answer %s as %T: %v", body, want, err)
	}
	return got.Elem().Interface()
}

// metricsText is the value of every counter and gauge of the extender's own that
// TestHandlerMetricsCount checks, with the route fixture's state.
func metricsText(filters, prioritizes, binds, bindFailures, preempts int) map[string]float64 {
	return map[string]float64{
		"gpushare_filter_total": float64(filters), "gpushare_prioritize_total": float64(prioritizes),
		"gpushare_bind_total": float64(binds), "gpushare_bind_failures_total": float64(bindFailures),
		"gpushare_preempt_total": float64(preempts), "gpushare_bind_unknown_outcome_total": 0,
		"gpushare_bind_settled_bound_total": 0, "gpushare_bind_settled_released_total": 0,
		"gpushare_bind_rollbacks_total": 0, "gpushare_unauthenticated_requests_total": 0,
		"gpushare_events_dropped_total": 0, "gpushare_overcommitted_cards": 0, "gpushare_leader": 1,
	}
}

// scrape reads /metrics with Prometheus' text parser: every sample by name and labels
// (name{k="v",...}), histograms by their _count.
func scrape(t *testing.T, srv *httptest.Server) map[string]float64 {
	t.Helper()
	_, _, raw := do(t, srv, http.MethodGet, "/metrics", "")
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, raw)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			key := name
			if len(m.GetLabel()) > 0 {
				var ls []string
				for _, l := range m.GetLabel() {
					ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				key += "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			case m.Histogram != nil:
				out[key+"_count"] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

// TestHandlerMetricsCount checks that /metrics counts the calls answered through the routes.
func TestHandlerMetricsCount(t *testing.T) {
	bindP := `{"PodName":"p","PodNamespace":"default","PodUID":"uid-p","Node":"n1"}`
	args := `{"Pod":` + mustJSON(t, st.MakePod().Name("p").GPUMem(4).Obj()) + `,"NodeNames":["n1","n2"]}`
	tests := []struct {
		name  string
		calls []string // "path body" pairs, all POST under Prefix
		want  map[string]float64
	}{
		{name: "no calls", want: metricsText(0, 0, 0, 0, 0)},
		{
			name:  "one of each",
			calls: []string{"/filter " + args, "/prioritize " + args, "/bind " + bindP, "/preempt " + `{"Pod":{}}`},
			want:  metricsText(1, 1, 1, 0, 1),
		},
		{
			name:  "malformed calls are not counted",
			calls: []string{"/filter {", "/prioritize {", "/bind {", "/preempt {"},
			want:  metricsText(0, 0, 0, 0, 0),
		},
		{
			name:  "a retried bind of a bound pod counts no new bind, a refused bind to another node one failure",
			calls: []string{"/bind " + bindP, "/bind " + bindP, "/bind " + strings.Replace(bindP, "n1", "n4", 1)},
			want:  metricsText(0, 0, 1, 1, 0),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			nodes, pods := routeFixture()
			ext, _ := extenderOn(logger, nodes, pods)
			srv := httptest.NewServer(NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: testBodyLimit}, logger))
			defer srv.Close()
			for _, c := range tc.calls {
				path, body, _ := strings.Cut(c, " ")
				do(t, srv, http.MethodPost, Prefix+path, body)
			}
			got := scrape(t, srv)
			for name, want := range tc.want {
				if v, ok := got[name]; !ok || v != want {
					t.Errorf("%s = %v (present %v), want %v", name, v, ok, want)
				}
			}
		})
	}
}

// TestHandlerFilterNeverAddsNodes checks, for NodeNames requests of several shapes, that the
// answer's NodeNames keep the request's order, contain only nodes that were asked about, and
// that every asked node is either passed or failed.
func TestHandlerFilterNeverAddsNodes(t *testing.T) {
	tests := []struct {
		name  string
		nodes *[]string
		want  []string
	}{
		{name: "all known", nodes: names("n4", "n1", "n2", "n3"), want: []string{"n4", "n1"}},
		{name: "only unknown", nodes: names("x", "y"), want: []string{}},
		{name: "empty list", nodes: names(), want: []string{}},
		{name: "one fitting node", nodes: names("n1"), want: []string{"n1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			nodes, pods := routeFixture()
			ext, _ := extenderOn(logger, nodes, pods)
			srv := httptest.NewServer(NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: testBodyLimit}, logger))
			defer srv.Close()
			body := mustJSON(t, extenderv1.ExtenderArgs{Pod: st.MakePod().Name("p").GPUMem(4).Obj(), NodeNames: tc.nodes})
			_, _, raw := do(t, srv, http.MethodPost, Prefix+"/filter", body)
			var res extenderv1.ExtenderFilterResult
			if err := json.Unmarshal(raw, &res); err != nil {
				t.Fatalf("decode %s: %v", raw, err)
			}
			if res.Nodes != nil || res.NodeNames == nil {
				t.Fatalf("answer must use NodeNames only: %s", raw)
			}
			if diff := cmp.Diff(tc.want, *res.NodeNames); diff != "" {
				t.Errorf("NodeNames (-want,+got):\n%s", diff)
			}
			answered := map[string]int{}
			for _, n := range *res.NodeNames {
				answered[n]++
			}
			for _, m := range []extenderv1.FailedNodesMap{res.FailedNodes, res.FailedAndUnresolvableNodes} {
				for n := range m {
					answered[n]++
				}
			}
			asked := map[string]int{}
			for _, n := range *tc.nodes {
				asked[n]++
			}
			if diff := cmp.Diff(asked, answered); diff != "" {
				t.Errorf("every asked node must be answered exactly once (-asked,+answered):\n%s", diff)
			}
		})
	}
}

// TestHandlerAudit: the debug route answers the invariant check over the fake API: nothing
// while the cache equals it, then the pod the cache holds and the API does not.
func TestHandlerAudit(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes, pods := routeFixture()
	ext, api := extenderOn(logger, nodes, pods)
	for _, n := range nodes {
		if err := api.Tracker().Add(n); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: testBodyLimit}, logger))
	defer srv.Close()
	audit := func() cache.AuditReport {
		t.Helper()
		status, _, body := do(t, srv, http.MethodGet, Prefix+"/debug/audit", "")
		var r cache.AuditReport
		if err := json.Unmarshal(body, &r); status != http.StatusOK || err != nil {
			t.Fatalf("audit answered %d %s (%v)", status, body, err)
		}
		return r
	}
	if r := audit(); !r.OK() {
		t.Errorf("audit of a cache equal to the API = %+v", r)
	}
	ext.cache.SetPod(st.MakePod().Name("stray").GPUMem(2).Node("n1").Placement(`{"0":{"1":2}}`).Obj())
	want := []string{
		"n1: GPU1 is {Index:1 UUID:GPU-n1-1 Model:Tesla T4 Capacity:16 Used:0 Healthy:true} in the API, {Index:1 UUID:GPU-n1-1 Model:Tesla T4 Capacity:16 Used:2 Healthy:true} in the cache",
		"n1: pod default/stray: Bound in the cache with map[0:map[1:2]], not bound there in the API",
	}
	if diff := cmp.Diff(want, audit().Differences); diff != "" {
		t.Errorf("differences (-want,+got):\n%s", diff)
	}
}

// TestHandlerMetricsState: /metrics reports each card's capacity, allocated memory, pods and
// health from the cache, the cache's size, filter's rejections by reason and each verb's
// latency. Fixture: n1 two 16 GiB cards, n2 one 8 GiB card with 6 held, n3 one unhealthy
// 16 GiB card, n4 one 8 GiB card with 2 held; a filter of a 4 GiB pod over all four (n1, n4
// pass; n2 lacks free memory; n3 has no healthy card) and of a pod with an invalid request.
func TestHandlerMetricsState(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes, pods := routeFixture()
	ext, _ := extenderOn(logger, nodes, pods)
	srv := httptest.NewServer(NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: testBodyLimit}, logger))
	defer srv.Close()
	args := `{"Pod":` + mustJSON(t, st.MakePod().Name("p").GPUMem(4).Obj()) + `,"NodeNames":["n1","n2","n3","n4"]}`
	bad := `{"Pod":` + mustJSON(t, st.MakePod().Name("bad").GPUMem(4).Annotation("gpushare.io/gpu-count", "x").Obj()) + `,"NodeNames":["n1","n2"]}`
	do(t, srv, http.MethodPost, Prefix+"/filter", args)
	do(t, srv, http.MethodPost, Prefix+"/filter", bad)
	got := scrape(t, srv)
	const gib = 1 << 30
	want := map[string]float64{
		`gpushare_card_capacity_bytes{card="0",model="Tesla T4",node="n1"}`: 16 * gib,
		`gpushare_card_allocated_bytes{card="0",node="n2"}`:                 6 * gib,
		`gpushare_card_pods{card="0",node="n2"}`:                            1,
		`gpushare_card_pods{card="1",node="n1"}`:                            0,
		`gpushare_card_healthy{card="0",node="n3"}`:                         0,
		`gpushare_card_healthy{card="0",node="n4"}`:                         1,
		"gpushare_cache_nodes":                                              4,
		"gpushare_cache_pods":                                               2,
		`gpushare_filter_unfit_nodes_total{reason="no_free_block"}`:         1,
		`gpushare_filter_unfit_nodes_total{reason="unresolvable"}`:          1,
		`gpushare_filter_unfit_nodes_total{reason="invalid_request"}`:       2,
		`gpushare_extender_request_duration_seconds{verb="filter"}_count`:   2,
		"gpushare_filter_total":                                             1,
	}
	for name, w := range want {
		if v, ok := got[name]; !ok || v != w {
			t.Errorf("%s = %v (present %v), want %v", name, v, ok, w)
		}
	}
	if v := got[`gpushare_extender_request_duration_seconds{verb="bind"}_count`]; v != 0 {
		t.Errorf("%v bind latencies without a bind call", v)
	}
}

// TestHandlerMetricsLearned: with a learning policy, /metrics says how many task shapes it
// remembers and how many task types it scores against; without one, nothing.
func TestHandlerMetricsLearned(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes, pods := routeFixture() // "busy" (6 GiB) and "half" (2 GiB): two shapes
	for _, tc := range []struct {
		policy string
		want   map[string]float64
	}{
		{"fgd-online", map[string]float64{
			`gpushare_policy_learned_task_shapes{policy="fgd-online"}`: 2,
			`gpushare_policy_typical_task_types{policy="fgd-online"}`:  2,
		}},
		{"binpack", nil},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			ext, _ := extenderOn(logger, nodes, pods)
			policy, err := policies.NewRegistry().New(tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			ext.policy = policy
			ext.Relearn()
			srv := httptest.NewServer(NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: testBodyLimit}, logger))
			defer srv.Close()
			got := map[string]float64{}
			for name, v := range scrape(t, srv) {
				if strings.HasPrefix(name, "gpushare_policy_") {
					got[name] = v
				}
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("learned metrics (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPooledAnswersKeepNothingOfEarlierCalls: calls of every size in turn, so that each reuses
// the buffers, names and scores of a larger or smaller one before it, answer exactly their own
// candidates; no candidates answer [], not null.
func TestPooledAnswersKeepNothingOfEarlierCalls(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes, pods := routeFixture()
	ext, _ := extenderOn(logger, nodes, pods)
	srv := httptest.NewServer(NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: DefaultMaxBodyBytes}, logger))
	defer srv.Close()
	pod := st.MakePod().Name("p").GPUMem(4).Obj()
	for _, names := range [][]string{{}, {"n1", "n2", "n3", "n4", "ghost"}, {}, {"n4"}, {"n2", "ghost"}, {}, {"n1", "n2", "n3", "n4", "ghost"}} {
		body := mustJSON(t, extenderv1.ExtenderArgs{Pod: pod, NodeNames: &names})
		status, _, answer := do(t, srv, http.MethodPost, Prefix+"/prioritize", body)
		var list extenderv1.HostPriorityList
		if err := json.Unmarshal(answer, &list); status != http.StatusOK || err != nil || list == nil {
			t.Fatalf("prioritize of %q: %d %s (%v)", names, status, answer, err)
		}
		hosts := make([]string, len(list))
		for i := range list {
			hosts[i] = list[i].Host
		}
		if diff := cmp.Diff(names, hosts); diff != "" {
			t.Errorf("prioritize of %q answered hosts (-want,+got):\n%s", names, diff)
		}
		status, _, answer = do(t, srv, http.MethodPost, Prefix+"/filter", body)
		var res extenderv1.ExtenderFilterResult
		if err := json.Unmarshal(answer, &res); status != http.StatusOK || err != nil || res.NodeNames == nil {
			t.Fatalf("filter of %q: %d %s (%v)", names, status, answer, err)
		}
		for _, n := range *res.NodeNames {
			if !slices.Contains(names, n) {
				t.Errorf("filter of %q passed %q, not a candidate", names, n)
			}
		}
		for n := range res.FailedAndUnresolvableNodes {
			if !slices.Contains(names, n) {
				t.Errorf("filter of %q failed %q, not a candidate", names, n)
			}
		}
	}
}

// TestVerbTable: every verb is declared, with a route under Prefix that reaches its handler
// (not the router's 404 or 405), a forwarding rule, and holds applied.
func TestVerbTable(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	nodes, pods := routeFixture()
	ext, _ := extenderOn(logger, nodes, pods)
	srv := httptest.NewServer(NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: testBodyLimit}, logger))
	defer srv.Close()
	var got []string
	for id, v := range verbTable() {
		got = append(got, v.name)
		t.Run(v.name, func(t *testing.T) {
			if v.serve == nil || v.forward.Mode == server.AnswerHere || !v.holds {
				t.Errorf("verb %d %q: serve set %v, forwarding %v, holds %v; want all", id, v.name, v.serve != nil, v.forward.Mode, v.holds)
			}
			status, _, body := do(t, srv, http.MethodPost, Prefix+"/"+v.name, `{}`)
			if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
				t.Errorf("POST %s = %d %s: no route", Prefix+"/"+v.name, status, body)
			}
		})
	}
	if diff := cmp.Diff([]string{"filter", "prioritize", "bind", "preempt"}, got); diff != "" {
		t.Errorf("verbs (-want,+got):\n%s", diff)
	}
}
