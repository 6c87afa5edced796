package contract

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// MaxCorePercent is the largest compute cap a pod may ask: the whole card.
const MaxCorePercent = 100

// coreDigits is the most digits of a core annotation: the admission policy's '^[0-9]{1,3}$'.
const coreDigits = 3

// CoreLimit reads the pod's compute cap (Names.CoreAnnotation): each of its gpu-mem containers
// may use at most percent of its cards' SMs. ok is false when the pod sets none. It accepts
// what the admission policy (config/admission/pod-requests.yaml) accepts: after trimming
// spaces, one to three decimal digits (no sign) of a value from 1 to MaxCorePercent; anything
// else is an error wrapping ErrInvalidRequest.
func CoreLimit(pod *v1.Pod, names *Names) (percent int, ok bool, err error) {
	v, found := pod.Annotations[names.CoreAnnotation]
	if !found {
		return 0, false, nil
	}
	n, valid := parseDigits(v, coreDigits)
	if !valid || n < 1 || n > MaxCorePercent {
		return 0, false, fmt.Errorf("%w: annotation %s=%.20q must be an integer percent of the GPU's SMs from 1 to %d (digits only)",
			ErrInvalidRequest, names.CoreAnnotation, v, MaxCorePercent)
	}
	return n, true, nil
}

// parseDigits reads v, trimmed of spaces as the admission policy's trim() does, when it is one
// to maxDigits decimal digits: no sign, no other character. strconv.Atoi alone would take
// "+30", which the policy refuses.
func parseDigits(v string, maxDigits int) (int, bool) {
	s := strings.TrimSpace(v)
	if len(s) == 0 || len(s) > maxDigits {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}
