// Package draconvert lets unchanged gpu-mem manifests run on nodes of the DRA mode: a mutating
// admission webhook turns a pod's `aliyun.com/gpu-mem: N` limits (with the gpu-count, model and
// core annotations of the contract) into Dynamic Resource Allocation claims that the gpushare
// DRA driver's devices serve, one claim per container.
//
// Why a webhook and not a MutatingAdmissionPolicy: a pod can name a claim only through
// spec.resourceClaims, as a ResourceClaim or a ResourceClaimTemplate of its own namespace
// (core/v1 PodResourceClaim has no inline claim spec in v1.37), and a policy can mutate only
// the object it admits, never create another. The template must therefore exist before, or
// be made by, the admission step: the webhook makes it, named after its spec, in the pod's
// namespace, and patches the pod to name it.
//
// The conversion of one container asking N units (of --unit) over C cards (gpu-count, 1 by
// default) is a claim template with one request "gpu":
//
//	exactly: {deviceClassName: gpushare.aliyun.com, allocationMode: ExactCount, count: C,
//	          capacity: {requests: {memory: N*unit/C, cores: P (when gpu-core is P)}},
//	          selectors: [CEL accepting the models of gpu-model, when set]}
//	constraints: [{requests: [gpu], distinctAttribute: gpushare.aliyun.com/uuid}] when C > 1
//
// and the pod gets spec.resourceClaims {name: gpushare-<key>, resourceClaimTemplateName}, the
// container resources.claims {name: gpushare-<key>}, and loses gpu-mem from its limits and
// requests (the kubelet of a DRA node has no such resource). <key> is the container's key in
// the contract's placement ("0", "init-0"). Each container has its own claim, so that its
// limit is its own claim's consumed memory.
//
// What DRA cannot express is refused when the pod is created, with a message: see Convert and
// checks.go. Convert is pure; TemplateEnsurer does the API calls; Handler serves the
// AdmissionReviews.
package draconvert
