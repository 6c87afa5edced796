package gpumem

import "strings"

// ContainerRequest is one container's ask for GPU memory.
type ContainerRequest struct {
	// Key identifies the container in an Allocation: "0", "1", … for app containers by index,
	// "init-0", … for init containers.
	Key string
	// Name is the container's name.
	Name string
	// Init is true for init containers.
	Init bool
	// Units is the container's total ask.
	Units int64
	// GPUs is the number of cards the units are split over evenly.
	GPUs int
}

// PerGPU is the units the container takes on each of its cards.
func (c ContainerRequest) PerGPU() int64 { return c.Units / int64(c.GPUs) }

// PodRequest is what a pod asks: its gpu-mem containers and the GPU models it accepts.
type PodRequest struct {
	// Containers lists the containers that ask gpu-mem, init containers first.
	Containers []ContainerRequest
	// Models lists the accepted GPU models; empty means any. Set it with SetModels to have
	// the entries tokenized once for every card they are matched against.
	Models []string
	// ModelTokens are Models' entries split into matching tokens, derived by SetModels (nil
	// when Models was set directly: AcceptsModel then tokenizes on every call).
	ModelTokens [][]string `json:"-"`
}

// SetModels sets the accepted models and tokenizes them once, so that AcceptsModel costs no
// parsing per card.
func (r *PodRequest) SetModels(models []string) {
	r.Models = models
	r.ModelTokens = make([][]string, len(models))
	for i, m := range models {
		r.ModelTokens[i] = modelTokens(m)
	}
}

// Empty is true when the pod asks no GPU memory.
func (r *PodRequest) Empty() bool { return len(r.Containers) == 0 }

// TotalUnits is the pod's effective ask as Kubernetes counts it: the larger of the largest init
// container and the sum of the app containers.
func (r *PodRequest) TotalUnits() int64 {
	var initMax, apps int64
	for _, c := range r.Containers {
		if c.Init {
			initMax = max(initMax, c.Units)
		} else {
			apps += c.Units
		}
	}
	return max(initMax, apps)
}

// AcceptsModel reports whether a GPU of the given model may serve the pod.
func (r *PodRequest) AcceptsModel(model string) bool {
	if len(r.Models) == 0 {
		return true
	}
	if len(r.ModelTokens) == len(r.Models) {
		m := modelTokens(model)
		for _, e := range r.ModelTokens {
			if tokensMatch(e, m) {
				return true
			}
		}
		return false
	}
	for _, m := range r.Models {
		if ModelMatches(m, model) {
			return true
		}
	}
	return false
}

// ParseModels splits a model constraint such as "A100|H100" into its entries.
func ParseModels(v string) []string {
	var out []string
	for _, m := range strings.Split(v, "|") {
		if m = strings.TrimSpace(m); m != "" {
			out = append(out, m)
		}
	}
	return out
}

// ModelMatches reports whether a constraint entry names a GPU model. Both are split into
// alphanumeric tokens, case-insensitively; the entry matches when its tokens appear as a
// contiguous run in the model's. So "A100" and "a100-sxm4" match "NVIDIA A100-SXM4-40GB", while
// "A10" does not.
func ModelMatches(entry, model string) bool {
	return tokensMatch(modelTokens(entry), modelTokens(model))
}

// tokensMatch reports whether the entry's tokens e appear as a contiguous run in m.
func tokensMatch(e, m []string) bool {
	if len(e) == 0 {
		return false
	}
	for i := 0; i+len(e) <= len(m); i++ {
		if equalTokens(e, m[i:i+len(e)]) {
			return true
		}
	}
	return false
}

func modelTokens(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return !isLowerAlnum(r) })
}

// isLowerAlnum reports whether r is an ASCII lowercase letter or digit.
func isLowerAlnum(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' }

func equalTokens(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
