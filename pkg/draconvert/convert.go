package draconvert

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/gpushare/gpushare/pkg/contract"
)

// Claim is one container's converted ask.
type Claim struct {
	// Container is the container's name.
	Container string
	// Init is true for an init container.
	Init bool
	// Units is the gpu-mem the container asked, in units.
	Units int64
	// PodClaimName is the pod's resource claim made for the container: ClaimPrefix and the
	// container's key ("0", "init-0", …).
	PodClaimName string
	// Template is the claim template the pod claim is made from, named after its spec.
	Template *resourcev1.ResourceClaimTemplate
}

// Conversion is what turns a pod's gpu-mem asks into DRA claims: the templates that must exist
// in the pod's namespace, and the patch of the pod that names them.
type Conversion struct {
	// Claims lists one claim per container that asks gpu-mem, init containers first; empty
	// when the pod asks none (nothing to convert).
	Claims []Claim
	// Patch is the RFC 6902 JSON patch of the pod; nil when Claims is empty.
	Patch []byte
}

// Templates are the distinct templates of the claims (containers that ask alike share one).
func (c *Conversion) Templates() []*resourcev1.ResourceClaimTemplate {
	var out []*resourcev1.ResourceClaimTemplate
	seen := map[string]bool{}
	for _, cl := range c.Claims {
		if !seen[cl.Template.Name] {
			seen[cl.Template.Name] = true
			out = append(out, cl.Template)
		}
	}
	return out
}

// AsksResource reports whether a container or init container of pod asks the gpu-mem resource,
// in its limits or its requests.
func AsksResource(pod *v1.Pod, names *contract.Names) bool {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			_, lim := list[i].Resources.Limits[names.Resource]
			_, req := list[i].Resources.Requests[names.Resource]
			if lim || req {
				return true
			}
		}
	}
	return false
}

// Convert turns the gpu-mem asks of pod into one claim per container: N units on one card
// become one device with N x unit of memory capacity; with the gpu-count annotation C, C
// distinct devices with N/C units each; the model annotation a CEL selector
// (ModelSelector), the core annotation a cores capacity on each card. An ask the contract
// refuses gives an error wrapping contract.ErrInvalidRequest; one DRA cannot express, an
// error wrapping ErrNotExpressible. A pod that asks no gpu-mem gives an empty Conversion.
func Convert(pod *v1.Pod, cfg *Config) (*Conversion, error) {
	if !AsksResource(pod, &cfg.Names) {
		return &Conversion{}, nil
	}
	req, err := contract.ParseRequest(pod, &cfg.Names)
	if err != nil {
		return nil, err // invalid in either mode: no hint to opt out
	}
	if err := checkPod(pod, &cfg.Names); err != nil {
		return nil, err
	}
	core, _, _ := contract.CoreLimit(pod, &cfg.Names) // ParseRequest checked it
	selector, err := ModelSelector(cfg.Driver, req.Models)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w%s", cfg.Names.ModelAnnotation, err, optOutHint)
	}
	conv := &Conversion{Claims: make([]Claim, 0, len(req.Containers))}
	for _, c := range req.Containers {
		if err := checkContainer(c, &cfg.Names); err != nil {
			return nil, err
		}
		tmpl, err := claimTemplate(c, core, selector, cfg)
		if err != nil {
			return nil, err
		}
		conv.Claims = append(conv.Claims, Claim{Container: c.Name, Init: c.Init, Units: c.Units, PodClaimName: ClaimPrefix + c.Key, Template: tmpl})
	}
	if err := checkClaimNames(pod, conv.Claims); err != nil {
		return nil, err
	}
	if conv.Patch, err = buildPatch(pod, conv.Claims, &cfg.Names); err != nil {
		return nil, err
	}
	return conv, nil
}
