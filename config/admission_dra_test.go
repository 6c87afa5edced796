package config_test

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
)

// convertedPod is pod as DRA mode's webhook leaves it: pkg/draconvert's patch applied, as the
// API server applies it (the fake clientset's tracker uses the same RFC 6902 library), before
// the validating policies see it.
func convertedPod(t *testing.T, pod *v1.Pod) *v1.Pod {
	t.Helper()
	cfg := draconvert.DefaultConfig(contract.DefaultNames())
	conv, err := draconvert.Convert(pod, &cfg)
	if err != nil || conv.Patch == nil {
		t.Fatalf("converting %s: %v (patch %s)", pod.Name, err, conv.Patch)
	}
	got, err := fake.NewClientset(pod.DeepCopy()).CoreV1().Pods(pod.Namespace).Patch(t.Context(), pod.Name, types.JSONPatchType,
		conv.Patch, metav1.PatchOptions{})
	if err != nil {
		t.Fatalf("applying the patch %s: %v", conv.Patch, err)
	}
	if draconvert.AsksResource(got, &cfg.Names) || got.Annotations[draconvert.AnnotationConverted] == "" {
		t.Fatalf("the converted pod asks gpu-mem or lacks %s: %+v", draconvert.AnnotationConverted, got)
	}
	return got
}

// templatePod is a pod asking no gpu-mem whose container uses a pod claim from template, as
// a tenant could write it without the webhook.
func templatePod(template string, opts ...podOption) *v1.Pod {
	p := gpuPod(append([]podOption{withSpec(func(s *v1.PodSpec) {
		s.ResourceClaims = []v1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: &template}}
		for i := range s.Containers {
			s.Containers[i].Resources = v1.ResourceRequirements{Claims: []v1.ResourceClaim{{Name: "gpu"}}}
		}
	})}, opts...)...)
	return p
}

// TestPodRequestsPolicyConvertedPods: a gpu-mem pod that DRA mode's webhook converted asks
// gpu-mem no more when the pod-requests policy sees it, but HAMi-core holds its containers all
// the same, so the policy still evaluates it (by gpushare.io/gpu-mem-dra) and refuses what
// would let a container escape the limit, on create and for debug containers added later. A
// pod never converted that asks no gpu-mem is still not evaluated.
func TestPodRequestsPolicyConvertedPods(t *testing.T) {
	hostNetwork := withSpec(func(s *v1.PodSpec) { s.HostNetwork = true })
	debug := func(old *v1.Pod, opts ...podOption) admissionRequest {
		p := old.DeepCopy()
		for _, o := range opts {
			o(p)
		}
		return admissionRequest{operation: admission.Update, subresource: "ephemeralcontainers", object: p, oldObject: old}
	}
	runPolicyCases(t, podRequestsPolicy, []policyCase{
		{name: "clean", req: create(convertedPod(t, gpuPod())), allowed: true},
		{name: "a pod naming a gpushare template itself, protected env", req: create(templatePod("gpushare-4gi-0f3a", onContainer("main", env("CUDA_DEVICE_MEMORY_LIMIT_0")))),
			message: []string{"main", "CUDA_DEVICE_MEMORY_LIMIT_0"}},
		{name: "a pod naming a gpushare template itself, mount at /etc", req: create(templatePod("gpushare-4gi-0f3a", onContainer("main", mount("/etc/ld.so.preload")))),
			message: []string{"main", "/etc/ld.so.preload"}},
		{name: "a pod naming a gpushare template itself, clean", req: create(templatePod("gpushare-4gi-0f3a")), allowed: true},
		{name: "a pod naming another template: not evaluated", req: create(templatePod("nic-1", onContainer("main", env("CUDA_DEVICE_MEMORY_LIMIT_0")))), allowed: true},
		{name: "compute cap kept", req: create(convertedPod(t, gpuPod(withAnnotation(contract.DefaultCoreKey, "30")))), allowed: true},
		{name: "protected env", req: create(convertedPod(t, gpuPod(onContainer("main", env("CUDA_DEVICE_MEMORY_LIMIT_0"))))),
			message: []string{"main", "CUDA_DEVICE_MEMORY_LIMIT_0"}},
		{name: "protected env in a container without gpu-mem", req: create(convertedPod(t, gpuPod(onContainer("sidecar", env("NVIDIA_VISIBLE_DEVICES"))))),
			message: []string{"sidecar", "NVIDIA_VISIBLE_DEVICES"}},
		{name: "mount at /etc", req: create(convertedPod(t, gpuPod(onContainer("main", mount("/etc/ld.so.preload"))))),
			message: []string{"main", "/etc/ld.so.preload"}},
		{name: "privileged", req: create(convertedPod(t, gpuPod(onContainer("main", security(privileged))))), message: []string{"main", "privileged"}},
		{name: "hostNetwork", req: create(convertedPod(t, gpuPod(hostNetwork))), message: []string{"hostNetwork"}},
		{name: "debug container with protected env", req: debug(convertedPod(t, gpuPod()), withEphemeral("debugger", env("NVIDIA_VISIBLE_DEVICES"))),
			message: []string{"debugger", "NVIDIA_VISIBLE_DEVICES"}},
		{name: "never converted, no gpu-mem: not evaluated", req: create(plainPod(onContainer("main", env("NVIDIA_VISIBLE_DEVICES")), hostNetwork)), allowed: true},
	})
}
