package draconvert

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
)

// templateHashBytes is how many bytes of the spec's SHA-256 a template name carries: 64 bits,
// so that two specs of one namespace never meet under one name in practice, and a name that
// does meet another spec is refused (TemplateEnsurer), never reused.
const templateHashBytes = 8

// claimTemplate is the ResourceClaimTemplate of one container's ask: one request of c.GPUs
// devices of the device class, each with c.PerGPU() units of memory (and core percent of
// the card's SMs when core > 0), of the models selector accepts, on distinct cards. The
// caller has checked the ask (checkContainer), so the bytes do not overflow.
func claimTemplate(c contract.ContainerRequest, core int, selector string, cfg *Config) (*resourcev1.ResourceClaimTemplate, error) {
	memory := *resource.NewQuantity(c.PerGPU()*cfg.Names.UnitBytes(), resource.BinarySI)
	exact := &resourcev1.ExactDeviceRequest{
		DeviceClassName: cfg.DeviceClass,
		AllocationMode:  resourcev1.DeviceAllocationModeExactCount,
		Count:           int64(c.GPUs),
		Capacity:        &resourcev1.CapacityRequirements{Requests: map[resourcev1.QualifiedName]resource.Quantity{CapacityMemory: memory}},
	}
	if core > 0 {
		exact.Capacity.Requests[CapacityCores] = *resource.NewQuantity(int64(core), resource.DecimalSI)
	}
	if selector != "" {
		exact.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: selector}}}
	}
	spec := resourcev1.ResourceClaimTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{ManagedByLabel: ManagedBy}},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: RequestName, Exactly: exact}},
		}},
	}
	if c.GPUs > 1 {
		// The contract splits the ask over distinct cards. kube-scheduler's allocator (v1.37)
		// happens to walk a request's devices forward, never taking a shareable card twice
		// for one request; the constraint makes the rule part of the claim for any allocator.
		uuid := resourcev1.FullyQualifiedName(cfg.Driver + "/" + AttributeUUID)
		spec.Spec.Devices.Constraints = []resourcev1.DeviceConstraint{{Requests: []string{RequestName}, DistinctAttribute: &uuid}}
	}
	name, err := templateName(&spec, memory, c.GPUs)
	if err != nil {
		return nil, err
	}
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{ManagedByLabel: ManagedBy}},
		Spec:       spec,
	}, nil
}

// templateName names a template after its spec, so that every pod of a namespace that asks the
// same shares one template and a retried admission finds the template it made:
// "gpushare-<memory per card>[-x<cards>]-<hash of the spec>", e.g. "gpushare-4gi-x2-0f3a…".
func templateName(spec *resourcev1.ResourceClaimTemplateSpec, memory resource.Quantity, gpus int) (string, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return "", fmt.Errorf("encoding a claim template spec: %w", err)
	}
	sum := sha256.Sum256(raw)
	var b strings.Builder
	b.WriteString(ClaimPrefix)
	b.WriteString(strings.ToLower(memory.String()))
	if gpus > 1 {
		b.WriteString("-x" + strconv.Itoa(gpus))
	}
	b.WriteString("-" + hex.EncodeToString(sum[:templateHashBytes]))
	return b.String(), nil
}
