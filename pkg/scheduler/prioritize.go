package scheduler

import (
	"context"
	"fmt"
	"math"

	"k8s.io/klog/v2"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// Prioritize scores the candidate nodes with the policy. One node alone gets
// MaxExtenderPriority: the policy's best, and among equally good nodes the first in a fixed
// order of the pod's own (placement.TieOrder), so that kube-scheduler's own scores cannot choose among them (they spread
// pods, which is what a packing policy avoids); the others are scaled to
// 0..MaxExtenderPriority-1; nodes where the pod does not fit get 0. A pod without gpu-mem is
// scored too (it reaches the extender when the scheduler configuration sends it every pod):
// where its CPU goes decides which cards stay usable; in DRA mode it gets 0 everywhere.
func (e *Extender) Prioritize(ctx context.Context, args *extenderv1.ExtenderArgs) (extenderv1.HostPriorityList, error) {
	if args.Pod == nil {
		return nil, fmt.Errorf("prioritize: request has no pod")
	}
	names := argNodeNames(args)
	out := make(extenderv1.HostPriorityList, len(names)) // no candidates answer [], not null
	for i, n := range names {
		out[i] = extenderv1.HostPriority{Host: n}
	}
	req, err := e.request(args.Pod)
	if err != nil || (e.dra && req.Empty()) {
		return out, nil // filter already reported the error; a DRA pod of no gpu-mem is not ours to rate
	}
	buf := e.buffers.get(len(names))
	defer e.buffers.put(buf)
	e.scoreNodes(e.nodeView(verbPrioritize, args.Pod.UID), args.Pod, &req, names, buf)
	best, lo, hi := topNode(args.Pod, names, buf.raw, buf.fits)
	scores := newScaler(lo, hi)
	for i := range out {
		if buf.fits[i] {
			out[i].Score = min(scores.scale(buf.raw[i]), extenderv1.MaxExtenderPriority-1)
		}
	}
	if best >= 0 {
		out[best].Score = extenderv1.MaxExtenderPriority
	}
	e.metrics.prioritizes.Add(1)
	klog.FromContext(ctx).V(2).Info("Prioritized", "pod", klog.KObj(args.Pod), "policy", e.policy.Name(), "nodes", len(names))
	return out, nil
}

// scaler maps the best score hi to MaxExtenderPriority and the rest of [lo, hi) to
// 0..MaxExtenderPriority-1.
type scaler struct{ lo, hi, perUnit float64 }

func newScaler(lo, hi float64) scaler {
	s := scaler{lo: lo, hi: hi}
	if hi-lo > scoreEps {
		s.perUnit = float64(extenderv1.MaxExtenderPriority-1) / (hi - lo)
	}
	return s
}

func (s scaler) scale(v float64) int64 {
	if v >= s.hi-scoreEps {
		return extenderv1.MaxExtenderPriority
	}
	return min(extenderv1.MaxExtenderPriority-1, int64(math.Round((v-s.lo)*s.perUnit)))
}
