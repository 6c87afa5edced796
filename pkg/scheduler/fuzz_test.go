package scheduler

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	clienttesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/pkg/cache"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/placement/policies"
)

// fuzzVerb is the POST route FuzzHandler calls for an input byte.
func fuzzVerb(b uint8) string {
	switch b % 4 {
	case 0:
		return "filter"
	case 1:
		return "prioritize"
	case 2:
		return "bind"
	}
	return "preempt"
}

// fuzzPolicies are the policies FuzzHandler's extender runs, chosen by an input byte.
func fuzzPolicies() []string { return policies.NewRegistry().Names() }

// fuzzFixture is the cluster FuzzHandler starts from, in the fake API and in the cache:
//
//	n1: 16+16 GiB, pod "legacy" holds 2 on GPU1 (index annotation only)
//	n2: 8 GiB, pod "busy" holds 6               n3: 16 GiB, unhealthy
//	n4: 8 GiB, "half" holds 2, "broken" 1 pending (unusable placement)
//	n5: A100 40 GiB + T4 40 GiB, label zone=a, taint gpu=only:NoSchedule
//	n6: 32 GiB of gpu-mem over 4 cards, no GPU annotation (even split)
//
// and pending pods a bind can name: p (4), multi (3+2), init (6, then 2), pair (8 over two
// cards), a100 (4 on an A100, for n5), huge (40), cpu (no gpu-mem) and invalid (2^21 units).
func fuzzFixture() ([]*v1.Node, []*v1.Pod) {
	nodes := []*v1.Node{
		st.MakeNode("n1").GPUs(16, 16).Obj(),
		st.MakeNode("n2").GPUs(8).Obj(),
		st.MakeNode("n3").GPUs(16).Unhealthy(0).Obj(),
		st.MakeNode("n4").GPUs(8).Obj(),
		st.MakeNode("n5").GPUs(40, 40).Model(0, "NVIDIA A100-SXM4-40GB").Label("zone", "a").Taint("gpu", "only", v1.TaintEffectNoSchedule).Obj(),
		st.MakeNode("n6").EvenSplit(32, 4).Obj(),
	}
	pods := []*v1.Pod{
		st.MakePod().Name("p").GPUMem(4).Obj(),
		st.MakePod().Name("multi").GPUMem(3).GPUMem(2).Obj(),
		st.MakePod().Name("init").InitGPUMem(6).GPUMem(2).Obj(),
		st.MakePod().Name("pair").GPUMem(8).Annotation(contract.DefaultGPUsPerContainer, "2").Obj(),
		st.MakePod().Name("a100").GPUMem(4).Annotation(contract.DefaultModelKey, "A100").NodeSelector("zone", "a").
			Tolerate("gpu", "only", v1.TaintEffectNoSchedule).Obj(),
		st.MakePod().Name("huge").GPUMem(40).Obj(),
		st.MakePod().Name("cpu").Container().Obj(),
		st.MakePod().Name("invalid").GPUMem(2 << 20).Obj(),
		st.MakePod().Name("busy").GPUMem(6).Node("n2").Placement(`{"0":{"0":6}}`).Obj(),
		st.MakePod().Name("half").GPUMem(2).Node("n4").Placement(`{"0":{"0":2}}`).Obj(),
		st.MakePod().Name("broken").GPUMem(1).Node("n4").Placement(`{"0":`).Obj(),
		st.MakePod().Name("legacy").GPUMem(2).Node("n1").Annotation(contract.AnnotationIndex, "1").Obj(),
	}
	return nodes, pods
}

// fuzzEnv is an extender on fuzzFixture behind its HTTP handler.
type fuzzEnv struct {
	ctx     context.Context
	ext     *Extender
	api     *fake.Clientset
	handler http.Handler
	// unknownOutcome is set once an injected fault failed a Binding without saying whether
	// it applied it: the bind then answers an error while settling binds the pod.
	unknownOutcome atomic.Bool
}

// Faults FuzzHandlerPod injects into the first Binding the extender creates.
const (
	faultNone           = iota
	faultRefused        // 403: the API server refused it, the pod is not bound
	faultConflict       // 409 with the pod unbound (a UID precondition, say)
	faultLost           // a lost connection before the server applied it
	faultLostAfterApply // a lost answer after the server applied it
	faults
)

// injectFault makes the first pods/binding create fail with fault.
func (e *fuzzEnv) injectFault(fault int) {
	if fault == faultNone {
		return
	}
	var fired atomic.Bool
	gvr := v1.SchemeGroupVersion.WithResource("pods")
	e.api.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		ca, ok := a.(clienttesting.CreateAction)
		if !ok || a.GetSubresource() != "binding" || fired.Swap(true) {
			return false, nil, nil
		}
		b, ok := ca.GetObject().(*v1.Binding)
		if !ok {
			return false, nil, nil
		}
		switch fault {
		case faultRefused:
			return true, nil, apierrors.NewForbidden(gvr.GroupResource(), b.Name, errors.New("injected refusal"))
		case faultConflict:
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), b.Name, errors.New("injected conflict"))
		case faultLostAfterApply:
			if err := e.applyBinding(b); err != nil {
				return true, nil, err
			}
		}
		e.unknownOutcome.Store(true)
		return true, nil, errors.New("injected lost connection")
	})
}

// applyBinding does what the API server does with b: bind its pod and copy its annotations.
func (e *fuzzEnv) applyBinding(b *v1.Binding) error {
	gvr := v1.SchemeGroupVersion.WithResource("pods")
	obj, err := e.api.Tracker().Get(gvr, b.Namespace, b.Name)
	if err != nil {
		return err
	}
	pod := obj.(*v1.Pod).DeepCopy()
	pod.Spec.NodeName = b.Target.Name
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	maps.Copy(pod.Annotations, b.Annotations)
	return e.api.Tracker().Update(gvr, pod, b.Namespace)
}

// newFuzzEnv builds fuzzFixture in a fake API and a cache, and the extender over them with the
// named policy and its HTTP handler.
func newFuzzEnv(t testing.TB, policy string) *fuzzEnv {
	t.Helper()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.Verbosity(2)))
	nodes, pods := fuzzFixture()
	objs := make([]runtime.Object, 0, len(nodes)+len(pods))
	lister := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	c := cache.New(contract.DefaultNames(), logger)
	for _, n := range nodes {
		objs = append(objs, n)
		c.SetNode(n)
		if err := lister.Add(n); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pods {
		objs = append(objs, p)
		c.SetPod(p)
	}
	pol, err := policies.NewRegistry().New(policy)
	if err != nil {
		t.Fatal(err)
	}
	api := fakeAPIWithBinding(objs...)
	ext := NewExtender(c, api, pol, contract.DefaultNames(), WithClock(fixedNow), WithNodeLister(corelisters.NewNodeLister(lister)),
		WithSettleOptions(SettleOptions{FirstRetry: time.Millisecond, MaxRetry: time.Millisecond, Timeout: 50 * time.Millisecond}))
	ext.Relearn()
	ext.SyncPolicy()
	h := NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: testBodyLimit}, logger)
	return &fuzzEnv{ctx: t.Context(), ext: ext, api: api, handler: h}
}

// FuzzHandler sends two requests with fuzzed bodies to the extender's POST routes (filter,
// prioritize, bind, preempt, chosen by a byte each), the whole request path from the router
// to the cache and the fake API, on fuzzFixture under the policy a third byte chooses. After
// each request it checks that the handler did not panic; that it answered 200, 400 or 413
// with one JSON value of the route's type (an error body otherwise); that the answer keeps to
// the request (no node it was not asked about, one score per node in range, a bind that
// reports success bound the pod there and one that failed left it alone); and that the cache
// agrees with the fake API: every pod bound with a placement is charged there, no assumption
// is left for a pod the API does not show bound, and once the informer's events are replayed
// the audit finds no card over capacity and no difference. `go test` replays the seeds and
// testdata/fuzz/FuzzHandler; `make fuzz` mutates them (CONTRIBUTING.md).
func FuzzHandler(f *testing.F) {
	for _, s := range handlerSeeds(f) {
		f.Add(s.verb1, s.body1, s.verb2, s.body2, s.policy)
	}
	newFuzzEnv(f, "binpack").checkState(f, "the fixture") // once: every input starts from it
	f.Fuzz(func(t *testing.T, verb1 uint8, body1 string, verb2 uint8, body2 string, policy uint8) {
		names := fuzzPolicies()
		env := newFuzzEnv(t, names[int(policy)%len(names)])
		env.serve(t, fuzzVerb(verb1), body1)
		env.serve(t, fuzzVerb(verb2), body2)
	})
}

// fuzzNodeName is the node FuzzHandlerPod asks about for an input byte: one of the fixture's
// or one the extender does not know.
func fuzzNodeName(b uint8) string {
	names := []string{"n1", "n2", "n3", "n4", "n5", "n6", "ghost"}
	return names[int(b)%len(names)]
}

// FuzzHandlerPod is FuzzHandler with the pod written by the fuzzer and the JSON kept valid: a
// pod "fz" whose app and init containers ask fuzzed gpu-mem quantities, with fuzzed gpu-count
// and gpu-model annotations, is in the fake API; the fuzzer picks a node and a policy. Through
// the HTTP routes it filters the pod on the node, then prioritizes or preempts for it, then
// binds it there, with FuzzHandler's checks after each request; half of the inputs fail the
// first Binding as the fuzzer chooses (refused, conflict, or lost before or after the API
// server applied it), which must release or settle the pod's charge. And one more check:
// without a fault, filter and bind agree: a pod asking GPU memory passes the filter on an
// untainted node exactly when its bind there succeeds (n5's taint, which the filter leaves to
// kube-scheduler, refuses every bind).
func FuzzHandlerPod(f *testing.F) {
	f.Add("4", "", "", "", uint8(0), uint8(0), uint8(0), uint8(0))
	f.Add("3", "6", "", "", uint8(5), uint8(1), uint8(1), uint8(0))
	f.Add("16", "", "", "", uint8(0), uint8(2), uint8(2), uint8(0))
	f.Add("17", "", "", "", uint8(0), uint8(0), uint8(3), uint8(0))
	f.Add("8", "", "2", "", uint8(0), uint8(1), uint8(4), uint8(0))
	f.Add("8", "", "2", "", uint8(5), uint8(2), uint8(0), uint8(0))
	f.Add("2", "", "", "A100", uint8(4), uint8(0), uint8(1), uint8(0))
	f.Add("2", "", "", "T4", uint8(0), uint8(0), uint8(2), uint8(0))
	f.Add("3", "", "", "", uint8(1), uint8(1), uint8(3), uint8(0))
	f.Add("4", "", "", "", uint8(2), uint8(2), uint8(4), uint8(0))
	f.Add("", "", "", "", uint8(0), uint8(0), uint8(0), uint8(0))
	f.Add("10G", "", "", "", uint8(0), uint8(0), uint8(0), uint8(0))
	f.Add("4", "", "3", "", uint8(0), uint8(0), uint8(0), uint8(0))
	f.Add("4", "", "", "|", uint8(0), uint8(0), uint8(0), uint8(0))
	f.Add("6", "", "", "", uint8(3), uint8(1), uint8(1), uint8(0))
	f.Add("4", "", "", "", uint8(6), uint8(2), uint8(2), uint8(0))
	for fault := range faults {
		f.Add("4", "", "", "", uint8(0), uint8(2), uint8(0), uint8(fault))
		f.Add("3", "6", "", "", uint8(5), uint8(2), uint8(1), uint8(fault))
	}
	f.Fuzz(func(t *testing.T, gpuMem, initGPUMem, count, model string, node, verb, policy, fault uint8) {
		pod := fuzzPodOf(t, gpuMem, initGPUMem, count, model)
		names := fuzzPolicies()
		env := newFuzzEnv(t, names[int(policy)%len(names)])
		if err := env.api.Tracker().Add(pod); err != nil {
			t.Fatal(err)
		}
		if fault %= 2 * faults; fault >= faults {
			fault = faultNone // half of the time
		}
		env.injectFault(int(fault))
		nodeName := fuzzNodeName(node)
		passed := env.filterOn(t, pod, nodeName)
		switch verb % 3 {
		case 0:
			env.serve(t, "prioritize", mustEncode(t, extenderv1.ExtenderArgs{Pod: pod, NodeNames: &[]string{"n1", "n2", "n4", "n6", nodeName}}))
		case 1:
			victims := map[string]*extenderv1.MetaVictims{"n2": {Pods: []*extenderv1.MetaPod{{UID: "uid-busy"}}},
				"n4": {Pods: []*extenderv1.MetaPod{{UID: "uid-half"}, {UID: "uid-broken"}}}, nodeName: {}}
			env.serve(t, "preempt", mustEncode(t, extenderv1.ExtenderPreemptionArgs{Pod: pod, NodeNameToMetaVictims: victims}))
		}
		bindErr := env.bindOn(t, pod, nodeName)
		req, err := contract.ParseRequest(pod, &env.ext.names)
		if fault == faultNone && nodeName != "n5" && (err != nil || !req.Empty()) && passed != (bindErr == "") {
			t.Errorf("filter and bind disagree on %s: filter passed it: %v; bind there: %q", nodeName, passed, bindErr)
		}
	})
}

// filterOn filters pod on node through the handler and reports whether it passed.
func (e *fuzzEnv) filterOn(t *testing.T, pod *v1.Pod, node string) bool {
	t.Helper()
	_, answer := e.serve(t, "filter", mustEncode(t, extenderv1.ExtenderArgs{Pod: pod, NodeNames: &[]string{node}}))
	var res extenderv1.ExtenderFilterResult
	if err := json.Unmarshal(answer, &res); err != nil {
		t.Fatalf("filter answer %s: %v", answer, err)
	}
	return res.NodeNames != nil && slices.Contains(*res.NodeNames, node)
}

// bindOn binds pod to node through the handler and returns the answer's error ("" for none).
func (e *fuzzEnv) bindOn(t *testing.T, pod *v1.Pod, node string) string {
	t.Helper()
	_, answer := e.serve(t, "bind", mustEncode(t, extenderv1.ExtenderBindingArgs{PodName: pod.Name, PodNamespace: pod.Namespace, PodUID: pod.UID, Node: node}))
	var res extenderv1.ExtenderBindingResult
	if err := json.Unmarshal(answer, &res); err != nil {
		t.Fatalf("bind answer %s: %v", answer, err)
	}
	return res.Error
}

// fuzzPodOf is pod "fz" with an app container asking gpuMem and, when initGPUMem is set, an
// init container asking it; a non-empty count or model sets that annotation. A quantity the
// API server would refuse skips the input.
func fuzzPodOf(t *testing.T, gpuMem, initGPUMem, count, model string) *v1.Pod {
	t.Helper()
	w := st.MakePod().Name("fz")
	for k, v := range map[string]string{contract.DefaultGPUsPerContainer: count, contract.DefaultModelKey: model} {
		if v != "" {
			w.Annotation(k, v)
		}
	}
	pod := w.Obj()
	limits := func(s string) v1.ResourceList {
		if s == "" {
			return nil
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			t.Skip("not a quantity the API server accepts")
		}
		return v1.ResourceList{contract.DefaultResourceName: q}
	}
	cpuMem := v1.ResourceList{v1.ResourceCPU: resource.MustParse("500m"), v1.ResourceMemory: resource.MustParse("1Gi")}
	pod.Spec.Containers = []v1.Container{{Name: "app", Resources: v1.ResourceRequirements{Limits: limits(gpuMem), Requests: cpuMem}}}
	if initGPUMem != "" {
		pod.Spec.InitContainers = []v1.Container{{Name: "setup", Resources: v1.ResourceRequirements{Limits: limits(initGPUMem)}}}
	}
	return pod
}

func mustEncode(t *testing.T, v any) string {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// handlerSeed is one FuzzHandler input.
type handlerSeed struct {
	verb1 uint8
	body1 string
	verb2 uint8
	body2 string
	// policy picks from fuzzPolicies (binpack, fgd, fgd-online, random, spread).
	policy uint8
}

// handlerSeeds are requests kube-scheduler would send on fuzzFixture, and a few it would not.
func handlerSeeds(f *testing.F) []handlerSeed {
	enc := func(v any) string {
		raw, err := json.Marshal(v)
		if err != nil {
			f.Fatal(err)
		}
		return string(raw)
	}
	_, pods := fuzzFixture()
	pod := func(name string) *v1.Pod {
		for _, p := range pods {
			if p.Name == name {
				return p
			}
		}
		f.Fatalf("no fixture pod %s", name)
		return nil
	}
	all := &[]string{"n1", "n2", "n3", "n4", "n5", "n6", "ghost"}
	filter := func(p string) string { return enc(extenderv1.ExtenderArgs{Pod: pod(p), NodeNames: all}) }
	bind := func(p, node string) string {
		return enc(extenderv1.ExtenderBindingArgs{PodName: p, PodNamespace: "default", PodUID: pod(p).UID, Node: node})
	}
	nodes, _ := fuzzFixture()
	preempt := enc(extenderv1.ExtenderPreemptionArgs{Pod: pod("p"), NodeNameToMetaVictims: map[string]*extenderv1.MetaVictims{
		"n2": {Pods: []*extenderv1.MetaPod{{UID: "uid-busy"}}}, "n4": {}, "ghost": {}}})
	preemptFull := enc(extenderv1.ExtenderPreemptionArgs{Pod: pod("huge"), NodeNameToVictims: map[string]*extenderv1.Victims{
		"n5": {Pods: []*v1.Pod{pod("busy")}, NumPDBViolations: 1}}})
	const filterV, prioritizeV, bindV, preemptV = 0, 1, 2, 3
	return []handlerSeed{
		{filterV, filter("p"), bindV, bind("p", "n1"), 0},
		{bindV, bind("p", "n1"), bindV, bind("p", "n1"), 1},
		{bindV, bind("multi", "n1"), filterV, filter("multi"), 2},
		{bindV, bind("init", "n6"), prioritizeV, filter("init"), 3},
		{bindV, bind("pair", "n1"), bindV, bind("pair", "n6"), 4},
		{bindV, bind("a100", "n5"), preemptV, preempt, 0},
		{bindV, bind("huge", "n5"), bindV, bind("p", "n5"), 1},
		{bindV, bind("cpu", "n1"), bindV, bind("invalid", "n1"), 2},
		{bindV, bind("busy", "n2"), bindV, bind("p", "ghost"), 3},
		{prioritizeV, filter("a100"), filterV, enc(extenderv1.ExtenderArgs{Pod: pod("p"), Nodes: &v1.NodeList{Items: []v1.Node{*nodes[0], *nodes[5]}}}), 4},
		{preemptV, preemptFull, filterV, filter("cpu"), 0},
		{filterV, `{"NodeNames":["n1"]}`, prioritizeV, `{"NodeNames":["n1"]}`, 1},
		{filterV, `{"Pod": garbage`, bindV, `{"PodName":"p","PodNamespace":"default"}`, 2},
		{filterV, `{"NodeNames":[]} {"NodeNames":["n1"]}`, preemptV, `{"Pod":{"metadata":7}}`, 3},
		{bindV, `{"PodName":"p","PodNamespace":"default","Node":"n1","PodUID":"other"}`, filterV, "", 4},
		{filterV, `{"NodeNames":["` + strings.Repeat("a", testBodyLimit) + `"]}`, bindV, bind("p", "n3"), 0},
	}
}

// serve sends body to the verb's route, checks the answer and the state after it, and returns
// the answer.
func (e *fuzzEnv) serve(t *testing.T, verb, body string) (int, []byte) {
	t.Helper()
	var before *v1.Pod
	var bindArgs extenderv1.ExtenderBindingArgs
	if verb == "bind" && json.Unmarshal([]byte(body), &bindArgs) == nil {
		before = e.apiPod(bindArgs.PodNamespace, bindArgs.PodName)
	}
	req := httptest.NewRequestWithContext(e.ctx, http.MethodPost, Prefix+"/"+verb, strings.NewReader(body))
	rec := httptest.NewRecorder()
	e.handler.ServeHTTP(rec, req)

	status, answer := rec.Code, rec.Body.Bytes()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s answered Content-Type %q, want application/json; body %s", verb, ct, answer)
	}
	switch status {
	case http.StatusOK:
		e.checkAnswer(t, verb, body, answer, before, &bindArgs)
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		var eb errorBody
		if err := decodeOne(answer, &eb); err != nil || eb.Error == "" {
			t.Fatalf("%s answered %d with %q, want an error body (%v)", verb, status, answer, err)
		}
	default:
		t.Fatalf("%s answered %d %s, want 200, 400 or 413", verb, status, answer)
	}
	e.checkState(t, "after "+verb)
	return status, answer
}

// decodeOne decodes exactly one JSON value of v's type from raw, refusing unknown fields.
func decodeOne(raw []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() || dec.InputOffset() != int64(len(bytes.TrimRight(raw, " \t\r\n"))) {
		return fmt.Errorf("data after the JSON value")
	}
	return nil
}

// checkAnswer checks a 200 answer of verb to body against the request.
func (e *fuzzEnv) checkAnswer(t *testing.T, verb, body string, answer []byte, before *v1.Pod, bindArgs *extenderv1.ExtenderBindingArgs) {
	t.Helper()
	switch verb {
	case "filter":
		var res extenderv1.ExtenderFilterResult
		if err := decodeOne(answer, &res); err != nil {
			t.Fatalf("filter answer %s: %v", answer, err)
		}
		var args extenderv1.ExtenderArgs
		e.mustAccept(t, body, &args)
		e.checkFilter(t, &args, &res)
	case "prioritize":
		var res extenderv1.HostPriorityList
		if err := decodeOne(answer, &res); err != nil {
			t.Fatalf("prioritize answer %s: %v", answer, err)
		}
		var args extenderv1.ExtenderArgs
		e.mustAccept(t, body, &args)
		checkScores(t, argNodeNames(&args), res)
	case "preempt":
		var args extenderv1.ExtenderPreemptionArgs
		var res extenderv1.ExtenderPreemptionResult
		if err := decodeOne(answer, &res); err != nil {
			t.Fatalf("preempt answer %s: %v", answer, err)
		}
		e.mustAccept(t, body, &args)
		for name := range res.NodeNameToMetaVictims {
			_, meta := args.NodeNameToMetaVictims[name]
			_, full := args.NodeNameToVictims[name]
			if !meta && !full {
				t.Errorf("preempt answered node %q, which the request did not name", name)
			}
		}
	case "bind":
		var res extenderv1.ExtenderBindingResult
		if err := decodeOne(answer, &res); err != nil {
			t.Fatalf("bind answer %s: %v", answer, err)
		}
		e.checkBind(t, bindArgs, before, res.Error)
	}
}

// mustAccept decodes a body the handler accepted into args, as kube-scheduler's types read it:
// the handler must have accepted one JSON value of args' type and nothing after it ("{}}" and
// "{}}0", testdata/fuzz/FuzzHandler/30908bda15879a3b and 5b00ec22cc61d040, were accepted until
// decode required io.EOF after the value).
func (e *fuzzEnv) mustAccept(t *testing.T, body string, args any) {
	t.Helper()
	if err := json.Unmarshal([]byte(body), args); err != nil {
		t.Fatalf("the handler accepted %q, which is not one JSON value of %T: %v", body, args, err)
	}
}

// checkFilter checks that a filter answer names only candidates, and passes a node the cache
// does not know only for a pod without gpu-mem.
func (e *fuzzEnv) checkFilter(t *testing.T, args *extenderv1.ExtenderArgs, res *extenderv1.ExtenderFilterResult) {
	t.Helper()
	names := argNodeNames(args)
	var passed []string
	if res.NodeNames != nil {
		passed = append(passed, *res.NodeNames...)
	}
	if res.Nodes != nil {
		for i := range res.Nodes.Items {
			passed = append(passed, res.Nodes.Items[i].Name)
		}
	}
	for _, name := range passed {
		if _, known := e.ext.cache.Node(name); known || args.Pod == nil {
			continue
		}
		if req, err := contract.ParseRequest(args.Pod, &e.ext.names); err != nil || !req.Empty() {
			t.Errorf("filter passed node %q, unknown to the extender, for a pod asking GPU memory (%v)", name, err)
		}
	}
	out := slices.Clone(passed)
	for name := range res.FailedNodes {
		out = append(out, name)
	}
	for name := range res.FailedAndUnresolvableNodes {
		out = append(out, name)
	}
	for _, name := range out {
		if !slices.Contains(names, name) {
			t.Errorf("filter answered node %q, which the request did not name (%q)", name, names)
		}
	}
}

// checkScores checks a prioritize answer: one score per candidate in the request's order, all
// from 0 to MaxExtenderPriority, and at most one node with the top score.
func checkScores(t *testing.T, names []string, res extenderv1.HostPriorityList) {
	t.Helper()
	hosts := make([]string, len(res))
	top := 0
	for i, hp := range res {
		hosts[i] = hp.Host
		if hp.Score < 0 || hp.Score > extenderv1.MaxExtenderPriority {
			t.Errorf("node %s scored %d, out of 0..%d", hp.Host, hp.Score, extenderv1.MaxExtenderPriority)
		}
		if hp.Score == extenderv1.MaxExtenderPriority {
			top++
		}
	}
	if diff := cmp.Diff(names, hosts, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("prioritize hosts (-request,+answer):\n%s", diff)
	}
	if top > 1 {
		t.Errorf("%d nodes have the top score; at most one may", top)
	}
}

// checkBind checks that a bind that reports success left the pod bound to the node asked, and
// one that failed left the pod as it was (unless its outcome was unknown: settling then binds
// it).
func (e *fuzzEnv) checkBind(t *testing.T, args *extenderv1.ExtenderBindingArgs, before *v1.Pod, failure string) {
	t.Helper()
	after := e.apiPod(args.PodNamespace, args.PodName)
	switch {
	case failure == "" && (after == nil || after.Spec.NodeName != args.Node):
		t.Errorf("bind of %s/%s to %s reported success; the API shows %v", args.PodNamespace, args.PodName, args.Node, podView(orEmpty(after)))
	case failure != "" && before != nil && !e.unknownOutcome.Load() && !cmp.Equal(podView(before), podView(orEmpty(after))):
		t.Errorf("bind failed (%s) but changed the pod (-before,+after):\n%s", failure, cmp.Diff(podView(before), podView(orEmpty(after))))
	}
}

func orEmpty(p *v1.Pod) *v1.Pod {
	if p == nil {
		return &v1.Pod{}
	}
	return p
}

// apiPod returns a pod of the fake API, nil when there is none.
func (e *fuzzEnv) apiPod(ns, name string) *v1.Pod {
	p, err := e.api.CoreV1().Pods(ns).Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

// checkState checks the cache against the fake API, then replays the informer's events for
// every pod and checks that the audit finds nothing.
func (e *fuzzEnv) checkState(t testing.TB, when string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(e.ctx, 5*time.Second)
	e.ext.WaitSettled(wctx) // a settle of an unknown outcome ends within its 50 ms timeout
	cancel()
	pods, err := e.api.CoreV1().Pods("").List(e.ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	names := contract.DefaultNames()
	for i := range pods.Items {
		e.checkCharged(t, when, &pods.Items[i], &names)
	}
	for _, n := range e.ext.cache.Nodes() {
		for _, p := range n.Pods {
			api := e.apiPod(p.Namespace, p.Name)
			if p.State == placement.PodAssumed && (api == nil || api.UID != p.UID || api.Spec.NodeName != p.Node) {
				t.Errorf("%s: pod %s is assumed on %s in the cache; the API shows %v", when, p.Key(), p.Node, podView(orEmpty(api)))
			}
		}
	}
	for i := range pods.Items {
		e.ext.cache.SetPod(&pods.Items[i]) // the informer's event, which the test plays
	}
	report, err := e.ext.Audit(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !report.OK() {
		t.Errorf("%s: audit after the informer's events: %+v", when, report)
	}
	if n := cache.OvercommittedCards(e.ext.cache.Nodes()); n != 0 {
		t.Errorf("%s: %d cards over capacity", when, n)
	}
}

// checkCharged checks that a pod the API shows bound with a usable placement is charged in the
// cache, on its node and cards, before the informer reports it.
func (e *fuzzEnv) checkCharged(t testing.TB, when string, pod *v1.Pod, names *contract.Names) {
	t.Helper()
	if pod.Spec.NodeName == "" {
		return
	}
	req, err := contract.ParseRequest(pod, names)
	if err != nil || req.Empty() {
		return
	}
	alloc, ok, err := contract.AllocationFromPod(pod, &req)
	if err != nil || !ok || !alloc.Matches(&req) {
		return
	}
	got, found := e.ext.cache.Pod(pod.UID)
	if !found || got.Node != pod.Spec.NodeName {
		t.Errorf("%s: pod %s is bound to %s with placement %v in the API; the cache has %+v", when, klog.KObj(pod), pod.Spec.NodeName, alloc, got)
		return
	}
	if diff := cmp.Diff(alloc, got.Allocation); diff != "" {
		t.Errorf("%s: pod %s placement (-API,+cache):\n%s", when, klog.KObj(pod), diff)
	}
}
