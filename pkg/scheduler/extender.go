package scheduler

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
)

// Extender answers kube-scheduler's filter, prioritize, bind and preempt calls. Every verb
// places the pod through a placement.Decision made with the extender's policy.
type Extender struct {
	cache   cache.Cache
	client  kubernetes.Interface
	policy  placement.Policy
	names   contract.Names
	metrics *Metrics
	now     func() time.Time
	buffers bufferPool
	// settleOpts and inflight settle binds whose outcome is unknown (settle.go).
	settleOpts SettleOptions
	inflight   inflight
	// leadership, if set, lets this replica bind only while it leads (leadership.go, server.Elector).
	leadership Leadership
	// nodes, if set, are the API's nodes, for Bind's checks of labels and taints.
	nodes corelisters.NodeLister
	// pods, if set, are the API's pods as the informer has them: Bind reads its pod there.
	pods corelisters.PodLister
	// filterChooses makes Filter answer a gpu-mem pod with the one node Prioritize would
	// give the top score (WithFilterChoosing).
	filterChooses bool
	// recorder, if set, records the GPUAssigned event of each pod Bind binds with gpu-mem;
	// eventRate, if set, bounds how many per second (the others are dropped and counted).
	recorder  events.EventRecorder
	eventRate flowcontrol.RateLimiter
	// preemption turns GPU preemption on (preempt.go); holds keeps freed cards for their
	// preemptors; preempting marks the pods whose preemption is in progress, and
	// preemptionEvents when each pod last got a GPUPreemptionFailed event of a reason.
	preemption       bool
	holds            *holdSet
	preempting       sync.Map
	preemptionEvents sync.Map
	// preemptionsDeferred is when each pod's preemption was last put off (preempt_plan.go).
	preemptionsDeferred sync.Map
	// planning serialises planning a preemption with writing its hold and putting it in force
	// (preempt_plan.go), so that each plan sees the holds of the plans before it: a semaphore of
	// one, which a caller stops waiting for when its context ends. It guards no data of its own.
	planning chan struct{}
	// holdKey signs and verifies the holds (hold_mac.go).
	holdKey []byte
	// holdsLed is whether this replica led at the last look (a new leader rebuilds the holds);
	// holdsSwept when the holds were last checked against the API's pods (unix nanoseconds).
	holdsLed   atomic.Bool
	holdsSwept atomic.Int64
	// gangs gathers the binds of a gang PodGroup's quorum (gang.go).
	gangs gangs
}

// verbID names one of the Extender's verbs; verbTable (handler.go) declares each, in this
// order.
type verbID int

// The verbs, in verbTable's order.
const (
	verbFilter verbID = iota
	verbPrioritize
	verbBind
	verbPreempt
	numVerbs
)

// Option configures an Extender.
type Option func(*Extender)

// WithClock sets the clock used for the assume-time annotation.
func WithClock(now func() time.Time) Option { return func(e *Extender) { e.now = now } }

// WithPodLister lets Bind read the pod from the informer instead of the API server (one call
// per bind instead of two); a pod the informer lacks is read from the API server.
func WithPodLister(l corelisters.PodLister) Option { return func(e *Extender) { e.pods = l } }

// WithFilterChoosing makes Filter answer a pod that asks gpu-mem with one node, the one
// Prioritize would give its top score, instead of every node where it fits. kube-scheduler
// then binds the pod there without scoring (it skips scoring when one node is left), which
// saves it the prioritize call and its own scoring of every candidate: the serial part of its
// cycle that bounds throughput. Its own scores (preferred affinities, spreading) then no longer
// apply to gpu-mem pods; with the shipped weight of 100 they could overrule the extender's
// choice only in rare cases anyway. When the pod fits no node, Filter says why for each node
// as without it.
func WithFilterChoosing(on bool) Option { return func(e *Extender) { e.filterChooses = on } }

// NewExtender returns an extender over c that binds through client.
func NewExtender(c cache.Cache, client kubernetes.Interface, policy placement.Policy, names contract.Names, opts ...Option) *Extender {
	e := &Extender{cache: c, client: client, policy: policy, names: names, now: time.Now, metrics: NewMetrics(),
		settleOpts: DefaultSettleOptions(), preemption: true, planning: make(chan struct{}, 1)}
	for _, o := range opts {
		o(e)
	}
	e.holds = newHoldSet(func() time.Time { return e.now() })
	if len(e.holdKey) == 0 {
		e.holdKey = randomHoldKey()
	}
	return e
}

// Policy returns the extender's placement policy.
func (e *Extender) Policy() placement.Policy { return e.policy }

// Metrics returns the extender's counters.
func (e *Extender) Metrics() *Metrics { return e.metrics }

// WithLeadership makes the extender bind only while l says it leads.
func WithLeadership(l Leadership) Option { return func(e *Extender) { e.leadership = l } }

// Leading reports whether this replica binds: it leads, or runs without leader election.
func (e *Extender) Leading() bool { return e.leadership == nil || e.leadership.Leading() }

// Cache returns the extender's cache (read-only use: inspect).
func (e *Extender) Cache() cache.Cache { return e.cache }
