package draconvert_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	cachetesting "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
)

// Builders and checks shared by the tests.

const testNamespace = "team-a"

// quantities compares resource quantities by value.
func quantities() cmp.Option {
	return cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })
}

type podOption func(*v1.Pod)

// makePod is pod "p" of testNamespace with the options applied.
func makePod(opts ...podOption) *v1.Pod {
	p := cachetesting.MakePod().Name("p").Namespace(testNamespace).Obj()
	for _, o := range opts {
		o(p)
	}
	return p
}

// gpuContainer is a container asking units of res in its limits (none when units is 0) and
// 1 CPU, with the container options applied.
func gpuContainer(name string, res v1.ResourceName, units int64, opts ...func(*v1.Container)) v1.Container {
	c := v1.Container{Name: name, Image: "busybox", Resources: v1.ResourceRequirements{
		Limits: v1.ResourceList{v1.ResourceCPU: resource.MustParse("1")},
	}}
	if units != 0 {
		c.Resources.Limits[res] = *resource.NewQuantity(units, resource.DecimalSI)
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

// app adds an app container asking units of the default gpu-mem.
func app(name string, units int64, opts ...func(*v1.Container)) podOption {
	return func(p *v1.Pod) {
		p.Spec.Containers = append(p.Spec.Containers, gpuContainer(name, contract.DefaultResourceName, units, opts...))
	}
}

// initApp adds an init container asking units of the default gpu-mem.
func initApp(name string, units int64, opts ...func(*v1.Container)) podOption {
	return func(p *v1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers, gpuContainer(name, contract.DefaultResourceName, units, opts...))
	}
}

// defaulted copies the limits into the requests, as the API server's defaulting does before
// admission.
func defaulted(c *v1.Container) { c.Resources.Requests = c.Resources.Limits.DeepCopy() }

// requests sets the request of the default gpu-mem.
func requests(units int64) func(*v1.Container) {
	return func(c *v1.Container) {
		c.Resources.Requests = v1.ResourceList{contract.DefaultResourceName: *resource.NewQuantity(units, resource.DecimalSI)}
	}
}

func annotate(k, v string) podOption { return func(p *v1.Pod) { p.Annotations[k] = v } }

func label(k, v string) podOption {
	return func(p *v1.Pod) {
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		p.Labels[k] = v
	}
}

// userClaim gives the pod a claim of its own, which its first container uses.
func userClaim(name string) podOption {
	return func(p *v1.Pod) {
		p.Spec.ResourceClaims = append(p.Spec.ResourceClaims, v1.PodResourceClaim{Name: name, ResourceClaimName: ptr.To("mine")})
		p.Spec.Containers[0].Resources.Claims = append(p.Spec.Containers[0].Resources.Claims, v1.ResourceClaim{Name: name})
	}
}

// wantSpec is the claim template spec of count cards with memory each, cores when not "", the
// selector when not "", on distinct cards when count > 1.
func wantSpec(count int64, memory, cores, selector string) resourcev1.ResourceClaimTemplateSpec {
	exact := &resourcev1.ExactDeviceRequest{
		DeviceClassName: draconvert.DefaultDeviceClass, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: count,
		Capacity: &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{"memory": resource.MustParse(memory)}},
	}
	if cores != "" {
		exact.Capacity.Requests["cores"] = resource.MustParse(cores)
	}
	if selector != "" {
		exact.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: selector}}}
	}
	s := resourcev1.ResourceClaimTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app.kubernetes.io/managed-by": "gpushare"}},
		Spec:       resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: exact}}}},
	}
	if count > 1 {
		s.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{{Requests: []string{"gpu"}, DistinctAttribute: ptr.To[resourcev1.FullyQualifiedName]("gpushare.aliyun.com/uuid")}}
	}
	return s
}

// applyPatch applies a JSON patch to pod as the API server does (the fake clientset's tracker
// applies it with the same RFC 6902 library) and returns the result.
func applyPatch(t *testing.T, pod *v1.Pod, patch []byte) *v1.Pod {
	t.Helper()
	client := fake.NewClientset(pod.DeepCopy())
	got, err := client.CoreV1().Pods(pod.Namespace).Patch(t.Context(), pod.Name, types.JSONPatchType, patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("applying the patch %s: %v", patch, err)
	}
	return got
}

// converted is what pod must become with claims, built field by field rather than by patch:
// the claims added to the pod and their containers, gpu-mem gone from each container's
// limits and requests, the annotation of what was asked.
func converted(t *testing.T, pod *v1.Pod, res v1.ResourceName, claims []draconvert.Claim) *v1.Pod {
	t.Helper()
	want := pod.DeepCopy()
	asked := map[string]int64{}
	for _, c := range claims {
		want.Spec.ResourceClaims = append(want.Spec.ResourceClaims, v1.PodResourceClaim{Name: c.PodClaimName, ResourceClaimTemplateName: ptr.To(c.Template.Name)})
		list := want.Spec.Containers
		if c.Init {
			list = want.Spec.InitContainers
		}
		found := false
		for i := range list {
			if list[i].Name == c.Container {
				found = true
				list[i].Resources.Claims = append(list[i].Resources.Claims, v1.ResourceClaim{Name: c.PodClaimName})
				delete(list[i].Resources.Limits, res)
				delete(list[i].Resources.Requests, res)
			}
		}
		if !found {
			t.Fatalf("claim %+v names no container of the pod", c)
		}
		asked[c.Container] = c.Units
	}
	raw, err := json.Marshal(asked)
	if err != nil {
		t.Fatal(err)
	}
	if want.Annotations == nil {
		want.Annotations = map[string]string{}
	}
	want.Annotations[draconvert.AnnotationConverted] = string(raw)
	return want
}
