package scheduler

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/gpushare/gpushare/pkg/contract"
)

// ReasonGPUAssigned is the reason of the Normal event Bind records on a pod it bound with
// gpu-mem, naming the node and the cards (WithEventRecorder).
const ReasonGPUAssigned = "GPUAssigned"

// WithEventRecorder makes Bind record on every pod it binds with gpu-mem a Normal event,
// GPUAssigned, that says which cards of which node hold how much of its memory: what
// `kubectl describe pod` shows. Recording is asynchronous (client-go's broadcaster), so a slow
// or failing events API never delays a bind. Why no node fits needs no event of ours:
// kube-scheduler's FailedScheduling event carries filter's per-node reasons, summarised.
func WithEventRecorder(r events.EventRecorder) Option { return func(o *options) { o.ext.recorder = r } }

// WithEventRate bounds the GPUAssigned events to qps per second with bursts of burst; Bind
// drops the events over it (gpushare_events_dropped_total counts them). Without a bound, a
// burst of binds makes a burst of event writes on the API server and etcd the binds need
// (docs/design.md, Throughput), and client-go's broadcaster, whose client waits for its own
// rate limit, keeps a goroutine and a copy of the event per waiting event.
func WithEventRate(qps float32, burst int) Option {
	return func(o *options) { o.ext.eventRate = flowcontrol.NewTokenBucketRateLimiter(qps, burst) }
}

// recordAssigned records the GPUAssigned event of a pod bound to node with the placement
// annotations ann.
func (e *Extender) recordAssigned(pod *v1.Pod, node string, ann map[string]string) {
	if e.recorder == nil || ann == nil {
		return
	}
	if e.eventRate != nil && !e.eventRate.TryAccept() {
		e.metrics.eventsDropped.Inc()
		return
	}
	alloc, err := contract.DecodeAllocation(ann[contract.AnnotationAllocation])
	if err != nil {
		return // not written by us: nothing to tell
	}
	per := alloc.PerGPU()
	gpus := make([]int, 0, len(per))
	for g := range per {
		gpus = append(gpus, g)
	}
	slices.Sort(gpus)
	snap, _ := e.cache.Node(node)
	unit := e.names.UnitLabel()
	parts := make([]string, 0, len(gpus))
	var total int64
	for _, g := range gpus {
		card := fmt.Sprintf("card %d", g)
		if snap != nil {
			if pos, ok := snap.Position(g); ok {
				gi := snap.GPUs[pos]
				card = fmt.Sprintf("card %d (%s, %s)", g, gi.Model, gi.UUID)
			}
		}
		parts = append(parts, fmt.Sprintf("%d %s on %s", per[g], unit, card))
		total += per[g]
	}
	e.recorder.Eventf(pod, nil, v1.EventTypeNormal, ReasonGPUAssigned, "Binding",
		"%d %s of GPU memory on node %s: %s", total, unit, node, strings.Join(parts, ", "))
}
