package config_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/kubernetes/fake"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin"
)

// The CEL harness: the shipped ValidatingAdmissionPolicies compiled and evaluated in-process with
// kube-apiserver's own machinery (k8s.io/apiserver's validating admission policy plugin), so a
// policy bug shows here rather than on a cluster. test/e2e's TestAdmission runs the same files
// on a real API server.

const (
	podRequestsPolicy = "admission/pod-requests.yaml"
	extenderUser      = "system:serviceaccount:kube-system:gpushare-extender"
	pluginUser        = "system:serviceaccount:kube-system:gpushare-share-plugin"
	ordinaryUser      = "alice"
	exemptLabel       = "gpushare.io/pod-security-exempt"
)

// admissionRequest is one request to the API server as a ValidatingAdmissionPolicy sees it. The
// resource is pods unless resource says otherwise.
type admissionRequest struct {
	resource    schema.GroupVersionResource // pods when empty
	operation   admission.Operation         // admission.Create when empty
	subresource string                      // "", "binding", "ephemeralcontainers", "eviction"
	object      runtime.Object              // a v1.Pod, v1.Binding or policyv1.Eviction; nil on DELETE
	oldObject   runtime.Object              // the stored pod, on UPDATE and DELETE
	dryRun      bool                        // the request's ?dryRun=All, what admission sees as request.dryRun
	username    string                      // ordinaryUser when empty
	extra       map[string][]string
	namespace   *v1.Namespace  // "default" without labels when nil
	params      runtime.Object // the binding's param (a Lease) when the policy has a paramKind; nil: not found
}

// compiledPolicy is a policy and its binding compiled as kube-apiserver compiles them.
type compiledPolicy struct {
	file      string
	policy    *admissionv1.ValidatingAdmissionPolicy
	binding   *admissionv1.ValidatingAdmissionPolicyBinding
	validator validating.Validator
}

// evalPolicy compiles the policy of file and evaluates req as kube-apiserver does. allowed is
// false when the policy denies; message is then the first denial's message (the one the API
// server returns). A request the policy's matchConstraints, its binding or its matchConditions
// do not select is allowed without evaluation. Compilation errors, evaluation errors and failed
// messageExpressions fail the test: under failurePolicy Fail they deny every request they touch.
func evalPolicy(t testing.TB, file string, req admissionRequest) (allowed bool, message string) {
	t.Helper()
	return compilePolicy(t, file).eval(t, req)
}

// compilePolicy reads, defaults and compiles the policy and binding of file as the validating
// plugin's (unexported) compilePolicy does, in the environment kube-apiserver validates a newly
// created policy with (NewExpressions, stricter than the StoredExpressions it evaluates with).
func compilePolicy(t testing.TB, file string) *compiledPolicy {
	t.Helper()
	p, b := readPolicy(t, file)
	defaultPolicy(p, b)
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		t.Fatalf("CEL compiler: %v", err)
	}
	vars := plugincel.OptionalVariableDeclarations{HasAuthorizer: true, HasParams: p.Spec.ParamKind != nil}
	for _, v := range p.Spec.Variables {
		if r := compiler.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, vars, environment.NewExpressions); r.Error != nil {
			t.Errorf("%s: variable %s: %v", file, v.Name, r.Error)
		}
	}
	var validations, messages, conditions []plugincel.ExpressionAccessor
	for _, v := range p.Spec.Validations {
		validations = append(validations, &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason})
		var m plugincel.ExpressionAccessor // nil where there is no messageExpression, as the plugin does
		if v.MessageExpression != "" {
			m = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
		messages = append(messages, m)
	}
	for i := range p.Spec.MatchConditions {
		conditions = append(conditions, (*matchconditions.MatchCondition)(&p.Spec.MatchConditions[i]))
	}
	mustCompile(t, file, compiler, validations, vars)
	mustCompile(t, file, compiler, conditions, vars)
	mustCompile(t, file, compiler, messages, plugincel.OptionalVariableDeclarations{HasParams: vars.HasParams})
	var matcher matchconditions.Matcher
	if len(conditions) > 0 {
		matcher = matchconditions.NewMatcher(compiler.CompileCondition(conditions, vars, environment.NewExpressions), p.Spec.FailurePolicy, "policy", "validate", p.Name)
	}
	v := validating.NewValidator(compiler.CompileCondition(validations, vars, environment.NewExpressions), matcher,
		compiler.CompileCondition(nil, vars, environment.NewExpressions),
		compiler.CompileCondition(messages, plugincel.OptionalVariableDeclarations{HasParams: vars.HasParams}, environment.NewExpressions), p.Spec.FailurePolicy, nil)
	return &compiledPolicy{file: file, policy: p, binding: b, validator: v}
}

// mustCompile fails the test for each expression that does not compile: the API server would
// refuse the policy.
func mustCompile(t testing.TB, file string, compiler *plugincel.CompositedCompiler, exprs []plugincel.ExpressionAccessor, vars plugincel.OptionalVariableDeclarations) {
	t.Helper()
	for _, e := range exprs {
		if e == nil {
			continue
		}
		if r := compiler.CompileCELExpression(e, vars, environment.NewExpressions); r.Error != nil {
			t.Errorf("%s: %v", file, r.Error)
		}
	}
}

// defaultPolicy sets the defaults kube-apiserver gives a policy and its binding when they are
// created (k8s.io/kubernetes pkg/apis/admissionregistration/v1/defaults.go).
func defaultPolicy(p *admissionv1.ValidatingAdmissionPolicy, b *admissionv1.ValidatingAdmissionPolicyBinding) {
	if p.Spec.FailurePolicy == nil {
		p.Spec.FailurePolicy = new(admissionv1.Fail)
	}
	for _, m := range []*admissionv1.MatchResources{p.Spec.MatchConstraints, b.Spec.MatchResources} {
		if m == nil {
			continue
		}
		if m.MatchPolicy == nil {
			m.MatchPolicy = new(admissionv1.Equivalent)
		}
		if m.NamespaceSelector == nil {
			m.NamespaceSelector = &metav1.LabelSelector{}
		}
		if m.ObjectSelector == nil {
			m.ObjectSelector = &metav1.LabelSelector{}
		}
		for i := range m.ResourceRules {
			if m.ResourceRules[i].Scope == nil {
				m.ResourceRules[i].Scope = new(admissionv1.AllScopes)
			}
		}
	}
}

// eval evaluates req as the validating plugin's dispatcher does: the policy's matchConstraints
// and the binding's matchResources select the request, then the validator runs matchConditions,
// variables and validations.
func (c *compiledPolicy) eval(t testing.TB, req admissionRequest) (allowed bool, message string) {
	t.Helper()
	return c.prepare(t, req).run(t)
}

// preparedRequest is a request made ready for the dispatcher (scheme, attributes, the
// namespace's lister): what kube-apiserver has at hand before it runs a policy. run is what it
// then does for this policy, per request.
type preparedRequest struct {
	c         *compiledPolicy
	req       admissionRequest
	ns        *v1.Namespace
	scheme    *runtime.Scheme
	attrs     admission.Attributes
	o         admission.ObjectInterfaces
	matcher   generic.PolicyMatcher
	noOpinion authorizer.Authorizer
}

func (c *compiledPolicy) prepare(t testing.TB, req admissionRequest) *preparedRequest {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ns := req.namespace
	if ns == nil {
		ns = &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: metav1.NamespaceDefault}}
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := indexer.Add(ns); err != nil {
		t.Fatal(err)
	}
	return &preparedRequest{c: c, req: req, ns: ns, scheme: scheme, attrs: req.attributes(t, scheme, ns.Name),
		o:       admission.NewObjectInterfacesFromScheme(scheme),
		matcher: generic.NewPolicyMatcher(matching.NewMatcher(listersv1.NewNamespaceLister(indexer), fake.NewClientset(ns))),
		noOpinion: authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
			return authorizer.DecisionNoOpinion, "", nil
		})}
}

// run matches and validates the prepared request.
func (p *preparedRequest) run(t testing.TB) (allowed bool, message string) {
	t.Helper()
	c := p.c
	matches, gvr, gvk, err := p.matcher.DefinitionMatches(p.attrs, p.o, validating.NewValidatingAdmissionPolicyAccessor(c.policy))
	if err != nil {
		t.Fatalf("%s: matchConstraints: %v", c.file, err)
	}
	if bound, err := p.matcher.BindingMatches(p.attrs, p.o, validating.NewValidatingAdmissionPolicyBindingAccessor(c.binding)); err != nil || !bound || !matches {
		if err != nil {
			t.Fatalf("%s: binding: %v", c.file, err)
		}
		return true, ""
	}
	versioned, err := admission.NewVersionedAttributes(p.attrs, gvk, p.o)
	if err != nil {
		t.Fatal(err)
	}
	if c.policy.Spec.ParamKind != nil && p.req.params == nil {
		return c.paramNotFound(t)
	}
	result := c.validator.Validate(t.Context(), gvr, versioned, typed(t, p.scheme, p.req.params), p.ns, celconfig.RuntimeCELCostBudget, p.noOpinion)
	return c.decide(t, result)
}

// paramNotFound decides as the dispatcher does when the binding's param does not exist: its
// paramRef's parameterNotFoundAction (Deny by default) decides.
func (c *compiledPolicy) paramNotFound(t testing.TB) (allowed bool, message string) {
	t.Helper()
	ref := c.binding.Spec.ParamRef
	if ref == nil {
		t.Fatalf("%s: the policy has a paramKind and its binding no paramRef", c.file)
	}
	if ref.ParameterNotFoundAction != nil && *ref.ParameterNotFoundAction == admissionv1.AllowAction {
		return true, ""
	}
	return false, "no params found for policy binding with `Deny` parameterNotFoundAction"
}

// decide returns the first denial of result, failing the test on evaluation errors.
func (c *compiledPolicy) decide(t testing.TB, result validating.ValidateResult) (allowed bool, message string) {
	t.Helper()
	allowed = true
	for _, d := range result.Decisions {
		if d.Evaluation == validating.EvalError {
			t.Errorf("%s: evaluation error: %s", c.file, d.Message)
		}
		if d.Action != validating.ActionDeny || !allowed {
			continue
		}
		if strings.HasPrefix(d.Message, "failed expression: ") {
			t.Errorf("%s: the messageExpression of a denial failed, too long or multi-line: %s", c.file, d.Message)
		}
		allowed, message = false, d.Message
	}
	return allowed, message
}

// attributes returns the admission attributes of r, its objects typed as the API server's are.
func (r admissionRequest) attributes(t testing.TB, scheme *runtime.Scheme, namespace string) admission.Attributes {
	t.Helper()
	op, username := r.operation, r.username
	if op == "" {
		op = admission.Create
	}
	if username == "" {
		username = ordinaryUser
	}
	var options runtime.Object = &metav1.CreateOptions{TypeMeta: metav1.TypeMeta{Kind: "CreateOptions", APIVersion: "meta.k8s.io/v1"}}
	switch op {
	case admission.Update:
		options = &metav1.UpdateOptions{TypeMeta: metav1.TypeMeta{Kind: "UpdateOptions", APIVersion: "meta.k8s.io/v1"}}
	case admission.Delete:
		options = &metav1.DeleteOptions{TypeMeta: metav1.TypeMeta{Kind: "DeleteOptions", APIVersion: "meta.k8s.io/v1"}}
	}
	obj, old := typed(t, scheme, r.object), typed(t, scheme, r.oldObject)
	named := obj // a DELETE has only the stored object, as the API server's
	if named == nil {
		named = old
	}
	m, err := meta.Accessor(named)
	if err != nil {
		t.Fatal(err)
	}
	resource := r.resource
	if resource.Empty() {
		resource = v1.SchemeGroupVersion.WithResource("pods")
	}
	return admission.NewAttributesRecord(obj, old, named.GetObjectKind().GroupVersionKind(), namespace, m.GetName(),
		resource, r.subresource, op, options, r.dryRun,
		&user.DefaultInfo{Name: username, Extra: r.extra})
}

// typed returns a copy of obj with its kind set, as the API server hands it to admission.
func typed(t testing.TB, scheme *runtime.Scheme, obj runtime.Object) runtime.Object {
	t.Helper()
	if obj == nil {
		return nil
	}
	kinds, _, err := scheme.ObjectKinds(obj)
	if err != nil {
		t.Fatal(err)
	}
	out := obj.DeepCopyObject()
	out.GetObjectKind().SetGroupVersionKind(kinds[0])
	return out
}

// policyCase is one request and the decision a policy must take on it.
type policyCase struct {
	name    string
	req     admissionRequest
	allowed bool
	message []string // substrings a denial's message must hold (the offending container, value)
}

// runPolicyCases compiles the policy of file once and evaluates every case against it.
func runPolicyCases(t *testing.T, file string, cases []policyCase) {
	t.Helper()
	policy := compilePolicy(t, file)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			allowed, message := policy.eval(t, tc.req)
			if allowed != tc.allowed {
				t.Fatalf("allowed %t, want %t (message %q)", allowed, tc.allowed, message)
			}
			for _, s := range tc.message {
				if !strings.Contains(message, s) {
					t.Errorf("message %q does not name %q", message, s)
				}
			}
		})
	}
}

// podOption changes a pod under test.
type podOption func(*v1.Pod)

// gpuPod is a valid GPU pod with opts applied: container "main" asks 4 units of gpu-mem and the
// pod's seccomp profile is RuntimeDefault.
func gpuPod(opts ...podOption) *v1.Pod {
	p := plainPod(func(p *v1.Pod) {
		p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault}}
		p.Spec.Containers[0].Resources.Limits = v1.ResourceList{contract.DefaultResourceName: resource.MustParse("4")}
	})
	for _, o := range opts {
		o(p)
	}
	return p
}

// plainPod is a pod that asks no gpu-mem, with opts applied.
func plainPod(opts ...podOption) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: metav1.NamespaceDefault},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: "cuda"}}}}
	for _, o := range opts {
		o(p)
	}
	return p
}

// onContainer applies fs to the container named name, adding one that asks no gpu-mem if the
// pod has none.
func onContainer(name string, fs ...func(*v1.Container)) podOption {
	return func(p *v1.Pod) { p.Spec.Containers = onNamed(p.Spec.Containers, name, fs) }
}

// onInitContainer applies fs to the init container named name, adding it if need be.
func onInitContainer(name string, fs ...func(*v1.Container)) podOption {
	return func(p *v1.Pod) { p.Spec.InitContainers = onNamed(p.Spec.InitContainers, name, fs) }
}

// onNamed applies fs to the container of cs named name, appending one if there is none.
func onNamed(cs []v1.Container, name string, fs []func(*v1.Container)) []v1.Container {
	i := 0
	for i < len(cs) && cs[i].Name != name {
		i++
	}
	if i == len(cs) {
		cs = append(cs, v1.Container{Name: name, Image: "busybox"})
	}
	for _, f := range fs {
		f(&cs[i])
	}
	return cs
}

// withEphemeral adds an ephemeral container named name with fs applied.
func withEphemeral(name string, fs ...func(*v1.Container)) podOption {
	return func(p *v1.Pod) {
		c := v1.Container{Name: name, Image: "busybox"}
		for _, f := range fs {
			f(&c)
		}
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, v1.EphemeralContainer{EphemeralContainerCommon: v1.EphemeralContainerCommon(c)})
	}
}

// withSpec applies f to the pod's spec.
func withSpec(f func(*v1.PodSpec)) podOption { return func(p *v1.Pod) { f(&p.Spec) } }

// withAnnotation sets the annotation k to v.
func withAnnotation(k, v string) podOption {
	return func(p *v1.Pod) { metav1.SetMetaDataAnnotation(&p.ObjectMeta, k, v) }
}

// withLabel sets the label k to v.
func withLabel(k, v string) podOption {
	return func(p *v1.Pod) { metav1.SetMetaDataLabel(&p.ObjectMeta, k, v) }
}

// The container options below each set or add one field of a container.

// gpuMem sets the container's gpu-mem limit to q.
func gpuMem(q string) func(*v1.Container) {
	return func(c *v1.Container) {
		c.Resources.Limits = v1.ResourceList{contract.DefaultResourceName: resource.MustParse(q)}
	}
}

// mount adds a volume mount at path.
func mount(path string) func(*v1.Container) {
	return func(c *v1.Container) {
		c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: "data", MountPath: path})
	}
}

// device adds a block device at path.
func device(path string) func(*v1.Container) {
	return func(c *v1.Container) {
		c.VolumeDevices = append(c.VolumeDevices, v1.VolumeDevice{Name: "disk", DevicePath: path})
	}
}

// terminationMessage sets the termination message path.
func terminationMessage(path string) func(*v1.Container) {
	return func(c *v1.Container) { c.TerminationMessagePath = path }
}

// env adds the env var name with a value.
func env(name string) func(*v1.Container) {
	return func(c *v1.Container) { c.Env = append(c.Env, v1.EnvVar{Name: name, Value: "x"}) }
}

// envFrom adds src to envFrom.
func envFrom(src v1.EnvFromSource) func(*v1.Container) {
	return func(c *v1.Container) { c.EnvFrom = append(c.EnvFrom, src) }
}

// security applies f to the container's securityContext, creating it if need be.
func security(f func(*v1.SecurityContext)) func(*v1.Container) {
	return func(c *v1.Container) {
		if c.SecurityContext == nil {
			c.SecurityContext = &v1.SecurityContext{}
		}
		f(c.SecurityContext)
	}
}

// privileged makes the container privileged.
func privileged(s *v1.SecurityContext) { s.Privileged = new(true) }

// addCapabilities adds caps.
func addCapabilities(caps ...v1.Capability) func(*v1.SecurityContext) {
	return func(s *v1.SecurityContext) { s.Capabilities = &v1.Capabilities{Add: caps} }
}

// seccomp sets the container's seccomp profile type.
func seccomp(typ v1.SeccompProfileType) func(*v1.SecurityContext) {
	return func(s *v1.SecurityContext) { s.SeccompProfile = seccompProfile(typ) }
}

// seccompProfile is a profile of type typ (with a profile file for Localhost).
func seccompProfile(typ v1.SeccompProfileType) *v1.SeccompProfile {
	p := &v1.SeccompProfile{Type: typ}
	if typ == v1.SeccompProfileTypeLocalhost {
		p.LocalhostProfile = new("profiles/gpu.json")
	}
	return p
}

// podSeccomp sets the pod's seccomp profile type; "" leaves it unset.
func podSeccomp(typ v1.SeccompProfileType) podOption {
	return withSpec(func(s *v1.PodSpec) {
		s.SecurityContext = &v1.PodSecurityContext{}
		if typ != "" {
			s.SecurityContext.SeccompProfile = seccompProfile(typ)
		}
	})
}

// create is the CREATE of p by an ordinary user in namespace default.
func create(p *v1.Pod) admissionRequest { return admissionRequest{object: p} }

// createIn is the CREATE of p by an ordinary user in ns.
func createIn(ns *v1.Namespace, p *v1.Pod) admissionRequest {
	p.Namespace = ns.Name
	return admissionRequest{object: p, namespace: ns}
}

// update is the UPDATE of old to p by username.
func update(username string, old, p *v1.Pod) admissionRequest {
	return admissionRequest{operation: admission.Update, object: p, oldObject: old, username: username}
}

// namespace is the namespace "tools" with labels.
func namespace(labels map[string]string) *v1.Namespace {
	return &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tools", Labels: labels}}
}

// TestPodRequestsPolicyCEL: the pod-requests policy's checks of what a GPU pod asks, and that
// it evaluates no other pod and no other subresource.
func TestPodRequestsPolicyCEL(t *testing.T) {
	count, core, preemption := contract.DefaultGPUsPerContainer, contract.DefaultCoreKey, contract.DefaultPreemptionKey
	runPolicyCases(t, podRequestsPolicy, []policyCase{
		{name: "valid gpu pod", req: create(gpuPod()), allowed: true},
		{name: "gpu-mem 0", req: create(gpuPod(onContainer("main", gpuMem("0")))), message: []string{"main", contract.DefaultResourceName}},
		{name: "gpu-mem 0 in an init container", req: create(gpuPod(onInitContainer("setup", gpuMem("0")))), message: []string{"setup", contract.DefaultResourceName}},
		{name: "gpu-mem 1024", req: create(gpuPod(onContainer("main", gpuMem("1024")))), allowed: true},
		{name: "gpu-mem 1025", req: create(gpuPod(onContainer("main", gpuMem("1025")))), message: []string{"main", "1025"}},
		{name: "gpu-mem 2048 over 2 GPUs", req: create(gpuPod(onContainer("main", gpuMem("2048")), withAnnotation(count, "2"))), allowed: true},
		{name: "gpu-count 64", req: create(gpuPod(onContainer("main", gpuMem("64")), withAnnotation(count, "64"))), allowed: true},
		{name: "gpu-count 0", req: create(gpuPod(withAnnotation(count, "0"))), message: []string{count, `"0"`}},
		{name: "gpu-count 65", req: create(gpuPod(withAnnotation(count, "65"))), message: []string{count, "65"}},
		{name: "gpu-count two", req: create(gpuPod(withAnnotation(count, "two"))), message: []string{count, "two"}},
		{name: "gpu-core 30 padded", req: create(gpuPod(withAnnotation(core, " 30 "))), allowed: true},
		{name: "gpu-core 1", req: create(gpuPod(withAnnotation(core, "1"))), allowed: true},
		{name: "gpu-core 100", req: create(gpuPod(withAnnotation(core, "100"))), allowed: true},
		{name: "gpu-core +30", req: create(gpuPod(withAnnotation(core, "+30"))), message: []string{core, "+30"}},
		{name: "gpu-core 0", req: create(gpuPod(withAnnotation(core, "0"))), message: []string{core, `"0"`}},
		{name: "gpu-core 101", req: create(gpuPod(withAnnotation(core, "101"))), message: []string{core, "101"}},
		{name: "preemption by a user", req: create(gpuPod(withAnnotation(preemption, "n1/0"))), message: []string{preemption}},
		{name: "preemption by the extender", req: admissionRequest{object: gpuPod(withAnnotation(preemption, "n1/0")), username: extenderUser,
			extra: map[string][]string{"authentication.kubernetes.io/pod-name": {"gpushare-extender-0"}}}, allowed: true},
		{name: "plain pod not evaluated", req: create(plainPod(onContainer("main", env("CUDA_DEVICE_MEMORY_LIMIT_0"), mount("/etc"), security(privileged)),
			withSpec(func(s *v1.PodSpec) { s.HostNetwork = true }))), allowed: true},
		{name: "pods/binding not evaluated", req: admissionRequest{subresource: "binding", object: &v1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: metav1.NamespaceDefault, Annotations: map[string]string{contract.AnnotationIndex: "0"}},
			Target:     v1.ObjectReference{Kind: "Node", Name: "n1"}}}, allowed: true},
		{name: "pods/eviction not evaluated", req: admissionRequest{subresource: "eviction", object: &policyv1.Eviction{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: metav1.NamespaceDefault}}}, allowed: true},
	})
}

// TestPodRequestsPolicyMountPaths: no container of a GPU pod mounts at a path that is not
// absolute and clean, or that is at, under or above a protected path.
func TestPodRequestsPolicyMountPaths(t *testing.T) {
	var cases []policyCase
	for _, tc := range []struct {
		path    string
		allowed bool
	}{
		{"etc/ld.so.preload", false}, {"tmp/x", false}, {"/tmp/../etc/ld.so.preload", false}, {"/data/./x", false},
		{"/data//x", false}, {"/", false}, {"/etc", false}, {"/etc/ld.so.preload", false}, {"/etc/ld.so.preload/", false},
		{"/etc/myapp/conf", false}, {"/usr", false}, {"/usr/local", false}, {"/usr/local/gpushare/lib", false}, {"/tmp", false},
		{"/tmp/gpushare/x", false}, {"/overrideEnv", false}, {"/var", false}, {"/var/run/nvidia-container-devices/all", false},
		{"/run", false}, {"/run/nvidia-container-devices", false},
		{"/data", true}, {"/models/llama", true}, {"/dev/shm", true}, {"/workspace/", true}, {"/tmpdata", true}, {"/etcetera", true},
	} {
		c := policyCase{name: "mount " + tc.path, req: create(gpuPod(onContainer("main", mount(tc.path)))), allowed: tc.allowed}
		if !tc.allowed {
			c.message = []string{"main", tc.path}
		}
		cases = append(cases, c)
	}
	exempt := namespace(map[string]string{exemptLabel: "true"})
	runPolicyCases(t, podRequestsPolicy, append(cases, []policyCase{
		{name: "device /etc/x", req: create(gpuPod(onContainer("main", device("/etc/x")))), message: []string{"main", "/etc/x"}},
		{name: "device /dev/xvda", req: create(gpuPod(onContainer("main", device("/dev/xvda")))), allowed: true},
		{name: "init container mounts /etc", req: create(gpuPod(onInitContainer("setup", mount("/etc")))), message: []string{"setup", "/etc"}},
		{name: "container without gpu-mem mounts /usr/local", req: create(gpuPod(onContainer("sidecar", mount("/usr/local")))), message: []string{"sidecar", "/usr/local"}},
		{name: "default termination message path", req: create(gpuPod(onContainer("main", terminationMessage(v1.TerminationMessagePathDefault)))), allowed: true},
		{name: "termination message path /etc/ld.so.preload", req: create(gpuPod(onContainer("main", terminationMessage("/etc/ld.so.preload")))),
			message: []string{"main", "/etc/ld.so.preload"}},
		{name: "exempt namespace mounts /etc", req: createIn(exempt, gpuPod(onContainer("main", mount("/etc")))), message: []string{"main", "/etc"}},
	}...))
}

// protectedEnvSpec returns the env name prefixes a GPU pod's containers may not set.
func protectedEnvSpec() []string {
	return []string{"CUDA_DEVICE_MEMORY_", "CUDA_DEVICE_SM_LIMIT", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
		"CUDA_TASK_PRIORITY", "CUDA_REDIRECT", "ACTIVE_OOM_KILLER", "GPU_CORE_UTILIZATION_POLICY", "RECORD_KERNEL_INTERVAL",
		"NVIDIA_", "ALIYUN_COM_GPU_MEM_"}
}

// TestPodRequestsPolicyEnv: no container of a GPU pod sets a protected env name, directly or
// through envFrom.
func TestPodRequestsPolicyEnv(t *testing.T) {
	var cases []policyCase
	for _, prefix := range protectedEnvSpec() {
		names := []string{strings.TrimSuffix(prefix, "_") + "_0"}
		if !strings.HasSuffix(prefix, "_") {
			names = append(names, prefix)
		}
		for _, name := range names {
			cases = append(cases, policyCase{name: "env " + name, req: create(gpuPod(onContainer("main", env(name)))), message: []string{"main", name}})
		}
	}
	fromConfigMap := func(prefix string) v1.EnvFromSource {
		return v1.EnvFromSource{Prefix: prefix, ConfigMapRef: &v1.ConfigMapEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}}}
	}
	valueFrom := func(c *v1.Container) {
		c.Env = append(c.Env, v1.EnvVar{Name: "NVIDIA_VISIBLE_DEVICES", ValueFrom: &v1.EnvVarSource{
			ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "settings"}, Key: "gpus"}}})
	}
	exempt := namespace(map[string]string{exemptLabel: "true"})
	runPolicyCases(t, podRequestsPolicy, append(cases, []policyCase{
		{name: "env LIBCUDA_LOG_LEVEL", req: create(gpuPod(onContainer("main", env("LIBCUDA_LOG_LEVEL")))), allowed: true},
		{name: "env MY_VAR", req: create(gpuPod(onContainer("main", env("MY_VAR")))), allowed: true},
		{name: "env from valueFrom", req: create(gpuPod(onContainer("main", valueFrom))), message: []string{"main", "NVIDIA_VISIBLE_DEVICES"}},
		{name: "container without gpu-mem", req: create(gpuPod(onContainer("sidecar", env("CUDA_VISIBLE_DEVICES")))), message: []string{"sidecar", "CUDA_VISIBLE_DEVICES"}},
		{name: "init container", req: create(gpuPod(onInitContainer("setup", env("ACTIVE_OOM_KILLER")))), message: []string{"setup", "ACTIVE_OOM_KILLER"}},
		{name: "envFrom ConfigMap without prefix", req: create(gpuPod(onContainer("main", envFrom(fromConfigMap(""))))), message: []string{"main", "settings"}},
		{name: "envFrom Secret without prefix", req: create(gpuPod(onContainer("main", envFrom(v1.EnvFromSource{
			SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}}})))), message: []string{"main", "creds"}},
		{name: "envFrom prefix CUDA_", req: create(gpuPod(onContainer("main", envFrom(fromConfigMap("CUDA_"))))), message: []string{"main", "CUDA_"}},
		{name: "envFrom prefix NVIDIA_VISIBLE", req: create(gpuPod(onContainer("main", envFrom(fromConfigMap("NVIDIA_VISIBLE"))))), message: []string{"main", "NVIDIA_VISIBLE"}},
		{name: "envFrom prefix CUDA_DEVICE_MEMORY_LIMIT_", req: create(gpuPod(onContainer("main", envFrom(fromConfigMap("CUDA_DEVICE_MEMORY_LIMIT_"))))),
			message: []string{"main", "CUDA_DEVICE_MEMORY_LIMIT_"}},
		{name: "envFrom prefix APP_", req: create(gpuPod(onContainer("main", envFrom(fromConfigMap("APP_"))))), allowed: true},
		{name: "exempt namespace", req: createIn(exempt, gpuPod(onContainer("main", env("NVIDIA_VISIBLE_DEVICES")))), message: []string{"main", "NVIDIA_VISIBLE_DEVICES"}},
	}...))
}

// TestPodRequestsPolicySecurity: a GPU pod outside an exempt namespace runs without privilege,
// SYS_ADMIN, host namespaces or paths, and with a seccomp profile.
func TestPodRequestsPolicySecurity(t *testing.T) {
	exempt := namespace(map[string]string{exemptLabel: "true"})
	notExempt := namespace(map[string]string{exemptLabel: "false"})
	hostNetwork := withSpec(func(s *v1.PodSpec) { s.HostNetwork = true })
	hostPath := withSpec(func(s *v1.PodSpec) {
		s.Volumes = append(s.Volumes, v1.Volume{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/"}}})
	})
	legacy := gpuPod(hostNetwork, onContainer("main", security(privileged)), podSeccomp(""))
	relabelled := legacy.DeepCopy()
	relabelled.Labels = map[string]string{"team": "ml"}
	runPolicyCases(t, podRequestsPolicy, []policyCase{
		{name: "RuntimeDefault on the pod and nothing else", req: create(gpuPod()), allowed: true},
		{name: "hostPID", req: create(gpuPod(withSpec(func(s *v1.PodSpec) { s.HostPID = true }))), message: []string{"hostPID"}},
		{name: "hostIPC", req: create(gpuPod(withSpec(func(s *v1.PodSpec) { s.HostIPC = true }))), message: []string{"hostIPC"}},
		{name: "hostNetwork", req: create(gpuPod(hostNetwork)), message: []string{"hostNetwork"}},
		{name: "privileged", req: create(gpuPod(onContainer("main", security(privileged)))), message: []string{"main", "privileged"}},
		{name: "privileged init container", req: create(gpuPod(onInitContainer("setup", security(privileged)))), message: []string{"setup", "privileged"}},
		{name: "privileged container without gpu-mem", req: create(gpuPod(onContainer("sidecar", security(privileged)))), message: []string{"sidecar", "privileged"}},
		{name: "add SYS_ADMIN", req: create(gpuPod(onContainer("main", security(addCapabilities("SYS_ADMIN"))))), message: []string{"main", "SYS_ADMIN"}},
		{name: "add CAP_SYS_ADMIN", req: create(gpuPod(onContainer("main", security(addCapabilities("NET_RAW", "CAP_SYS_ADMIN"))))), message: []string{"main", "CAP_SYS_ADMIN"}},
		{name: "add ALL", req: create(gpuPod(onContainer("main", security(addCapabilities("ALL"))))), message: []string{"main", "ALL"}},
		{name: "add sys_admin", req: create(gpuPod(onContainer("main", security(addCapabilities("sys_admin"))))), message: []string{"main", "sys_admin"}},
		{name: "add NET_BIND_SERVICE", req: create(gpuPod(onContainer("main", security(addCapabilities("NET_BIND_SERVICE"))))), allowed: true},
		{name: "container Unconfined", req: create(gpuPod(onContainer("main", security(seccomp(v1.SeccompProfileTypeUnconfined))))), message: []string{"main", "Unconfined"}},
		{name: "pod Unconfined", req: create(gpuPod(podSeccomp(v1.SeccompProfileTypeUnconfined))), message: []string{"main", "Unconfined"}},
		{name: "seccomp unset", req: create(gpuPod(podSeccomp(""))), message: []string{"main", "seccomp"}},
		{name: "seccomp unset on a container without gpu-mem", req: create(gpuPod(podSeccomp(""), onContainer("main", security(seccomp(v1.SeccompProfileTypeRuntimeDefault))),
			onContainer("sidecar"))), message: []string{"sidecar", "seccomp"}},
		{name: "seccomp on every container", req: create(gpuPod(podSeccomp(""), onContainer("main", security(seccomp(v1.SeccompProfileTypeRuntimeDefault))))), allowed: true},
		{name: "pod Localhost", req: create(gpuPod(podSeccomp(v1.SeccompProfileTypeLocalhost))), allowed: true},
		{name: "container Localhost", req: create(gpuPod(onContainer("main", security(seccomp(v1.SeccompProfileTypeLocalhost))))), allowed: true},
		{name: "hostPath volume", req: create(gpuPod(hostPath)), message: []string{"host", "hostPath"}},
		{name: "exempt hostNetwork", req: createIn(exempt, gpuPod(hostNetwork)), allowed: true},
		{name: "exempt privileged", req: createIn(exempt, gpuPod(onContainer("main", security(privileged)))), allowed: true},
		{name: "exempt seccomp unset", req: createIn(exempt, gpuPod(podSeccomp(""))), allowed: true},
		{name: "exempt hostPath", req: createIn(exempt, gpuPod(hostPath)), allowed: true},
		{name: "label false hostNetwork", req: createIn(notExempt, gpuPod(hostNetwork)), message: []string{"hostNetwork"}},
		// the policy's header: a pod created before the policy can still be updated (finalizers, labels)
		{name: "update of a pod created before the policy", req: update(ordinaryUser, legacy, relabelled), allowed: true},
	})
}

// placementKeys are the annotations only the extender and the share-plugin write.
func placementKeys() []string {
	return []string{contract.AnnotationIndex, contract.AnnotationPod, contract.AnnotationDev, contract.AnnotationAssigned,
		contract.AnnotationAssumeTime, contract.AnnotationAllocation}
}

// TestPodRequestsPolicyPlacement: only the extender and the share-plugin set, change or remove
// the placement annotations, and only the extender gpushare.io/preemption.
func TestPodRequestsPolicyPlacement(t *testing.T) {
	var cases []policyCase
	for _, key := range append(placementKeys(), contract.DefaultPreemptionKey) {
		writers := []string{extenderUser}
		if key != contract.DefaultPreemptionKey {
			writers = append(writers, pluginUser)
		}
		set := gpuPod(withAnnotation(key, "1"))
		cases = append(cases,
			policyCase{name: key + "/create on a gpu pod", req: create(set), message: []string{key}},
			policyCase{name: key + "/create on a pod without gpu-mem", req: create(plainPod(withAnnotation(key, "1"))), message: []string{key}},
			policyCase{name: key + "/update adds", req: update(ordinaryUser, gpuPod(), set), message: []string{key}},
			policyCase{name: key + "/update changes", req: update(ordinaryUser, set, gpuPod(withAnnotation(key, "2"))), message: []string{key}},
			policyCase{name: key + "/update removes", req: update(ordinaryUser, plainPod(withAnnotation(key, "1")), plainPod()), message: []string{key}},
			policyCase{name: key + "/update adds a label", req: update(ordinaryUser, set, gpuPod(withAnnotation(key, "1"), withLabel("team", "ml"))), allowed: true},
			policyCase{name: key + "/same name in another namespace", req: update("system:serviceaccount:default:gpushare-extender", gpuPod(), set), message: []string{key}},
		)
		for _, w := range writers {
			cases = append(cases,
				policyCase{name: key + "/update adds by " + w, req: update(w, gpuPod(), set), allowed: true},
				policyCase{name: key + "/update changes by " + w, req: update(w, set, gpuPod(withAnnotation(key, "2"))), allowed: true})
		}
	}
	cases = append(cases, policyCase{name: "preemption by the share-plugin", req: update(pluginUser, gpuPod(),
		gpuPod(withAnnotation(contract.DefaultPreemptionKey, "1"))), message: []string{contract.DefaultPreemptionKey}})
	runPolicyCases(t, podRequestsPolicy, cases)
}

// TestPodRequestsPolicyEphemeralContainers: the ephemeral containers an update of
// pods/ephemeralcontainers adds to a GPU pod are checked as its other containers are.
func TestPodRequestsPolicyEphemeralContainers(t *testing.T) {
	debug := func(old *v1.Pod, opts ...podOption) admissionRequest {
		p := old.DeepCopy()
		for _, o := range opts {
			o(p)
		}
		return admissionRequest{operation: admission.Update, subresource: "ephemeralcontainers", object: p, oldObject: old}
	}
	runPolicyCases(t, podRequestsPolicy, []policyCase{
		{name: "NVIDIA_VISIBLE_DEVICES", req: debug(gpuPod(), withEphemeral("debugger", env("NVIDIA_VISIBLE_DEVICES"))), message: []string{"debugger", "NVIDIA_VISIBLE_DEVICES"}},
		{name: "clean", req: debug(gpuPod(), withEphemeral("debugger", env("MY_VAR"))), allowed: true},
		{name: "mounts /etc", req: debug(gpuPod(), withEphemeral("debugger", mount("/etc"))), message: []string{"debugger", "/etc"}},
		{name: "privileged", req: debug(gpuPod(), withEphemeral("debugger", security(privileged))), message: []string{"debugger", "privileged"}},
		{name: "pod without gpu-mem", req: debug(plainPod(), withEphemeral("debugger", env("NVIDIA_VISIBLE_DEVICES"))), allowed: true},
	})
}

// TestProtectedEnvCoversHAMiCore: the policy's protectedEnv covers every name the pinned
// HAMi-core reads with getenv (but LIBCUDA_LOG_LEVEL, log verbosity only), what the NVIDIA
// container runtime reads and every name the share-plugin sets; and the policy refuses each.
func TestProtectedEnvCoversHAMiCore(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("..", "pkg", "contract", "testdata", "hami-core-getenv.txt"))
	if err != nil {
		t.Fatalf("the list of HAMi-core's env (hack/hami-core-env.sh): %v", err)
	}
	var names []string
	for _, line := range strings.Split(string(raw), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") && line != "LIBCUDA_LOG_LEVEL" {
			names = append(names, line)
		}
	}
	if len(names) == 0 {
		t.Fatal("hami-core-getenv.txt names no env")
	}
	names = append(names, "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES", contract.EnvVisibleDevices, contract.EnvIndex,
		contract.EnvPod, contract.EnvContainer, contract.EnvDev, deviceplugin.EnvMemoryLimit+"_0", deviceplugin.EnvSharedCache,
		deviceplugin.EnvSMLimit, deviceplugin.EnvDeviceOrder)
	slices.Sort(names)
	names = slices.Compact(names)
	p, _ := readPolicy(t, podRequestsPolicy)
	protected := variableLiterals(t, p, "protectedEnv")
	policy := compilePolicy(t, podRequestsPolicy)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			if !slices.ContainsFunc(protected, func(p string) bool { return strings.HasPrefix(name, p) }) {
				t.Errorf("protectedEnv %q has no prefix of %s", protected, name)
			}
			if allowed, _ := policy.eval(t, create(gpuPod(onContainer("main", env(name))))); allowed {
				t.Errorf("a GPU pod setting %s is admitted", name)
			}
		})
	}
}

// TestEvalPolicy checks the harness on a policy of its own: matchConstraints, matchConditions,
// the request's user and extra and the namespace object reach the CEL as on an API server.
func TestEvalPolicy(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policy.yaml")
	policy := `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: harness}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  matchConditions: [{name: not-skipped, expression: "object.metadata.name != 'skip'"}]
  validations:
    - expression: "object.metadata.name != 'deny'"
      messageExpression: "'denied ' + object.metadata.name"
    - expression: "namespaceObject.metadata.?labels.orValue({})[?'deny'].orValue('') != 'true'"
      messageExpression: "'namespace ' + namespaceObject.metadata.name"
    - expression: "!('deny' in request.userInfo.?extra.orValue({})) && request.userInfo.username != 'mallory'"
      messageExpression: "'user ' + request.userInfo.username"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: harness}
spec: {policyName: harness, validationActions: [Deny]}
`
	if err := os.WriteFile(file, []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	named := func(name string) *v1.Pod { return plainPod(func(p *v1.Pod) { p.Name = name }) }
	for _, tc := range []struct {
		name    string
		req     admissionRequest
		allowed bool
		message string
	}{
		{name: "admitted", req: create(named("ok")), allowed: true},
		{name: "denied", req: create(named("deny")), message: "denied deny"},
		{name: "matchConditions false", req: create(named("skip")), allowed: true},
		{name: "operation not matched", req: update(ordinaryUser, named("deny"), named("deny")), allowed: true},
		{name: "subresource not matched", req: admissionRequest{subresource: "binding", object: &v1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "deny"}}}, allowed: true},
		{name: "namespace labels", req: createIn(namespace(map[string]string{"deny": "true"}), named("ok")), message: "namespace tools"},
		{name: "username", req: admissionRequest{object: named("ok"), username: "mallory"}, message: "user mallory"},
		{name: "extra", req: admissionRequest{object: named("ok"), extra: map[string][]string{"deny": {"1"}}}, message: "user " + ordinaryUser},
	} {
		t.Run(tc.name, func(t *testing.T) {
			allowed, message := evalPolicy(t, file, tc.req)
			if allowed != tc.allowed || message != tc.message {
				t.Errorf("evalPolicy = %t, %q, want %t, %q", allowed, message, tc.allowed, tc.message)
			}
		})
	}
}
