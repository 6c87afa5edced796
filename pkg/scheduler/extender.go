package scheduler

import (
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/scheduler/fence"
	"github.com/gpushare/gpushare/pkg/scheduler/preempt"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
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
	// verbs are verbTable's, built once.
	verbs [numVerbs]verb
	// settleOpts and inflight settle binds whose outcome is unknown (bind.go).
	settleOpts SettleOptions
	inflight   inflight
	// leadership, if set, lets this replica bind only while it leads (server.Elector); fence
	// writes under the fence of the term it leads in.
	leadership server.Leadership
	fence      fence.Writer
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
	// preempt is the GPU preemption; holds are its holds, which the verbs' views overlay
	// where their verb says so (nodeView).
	preempt *preempt.Preemptor
	holds   overlay
	// gangs gathers the binds of a gang PodGroup's quorum (gang.go).
	gangs gangs
	// dra is DRA mode (WithDRA), over the devices of draDriver; placer is the policy filter and
	// prioritize place with: policy itself, or in DRA mode policy rating the card the
	// allocator will take (dra.go).
	dra       bool
	draDriver string
	placer    placement.Policy
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
type Option func(*options)

// options are what the Options set: the Extender, and the configuration of its preemption,
// which NewExtender builds once every option is applied.
type options struct {
	ext     *Extender
	preempt preempt.Config
}

// WithClock sets the clock used for the assume-time annotation and the preemption holds.
func WithClock(now func() time.Time) Option { return func(o *options) { o.ext.now = now } }

// WithPodLister lets Bind read the pod from the informer instead of the API server (one call
// per bind instead of two); a pod the informer lacks is read from the API server. Preemption
// reads its pods there too and rebuilds its holds from them.
func WithPodLister(l corelisters.PodLister) Option { return func(o *options) { o.ext.pods = l } }

// WithFilterChoosing makes Filter answer a pod that asks gpu-mem with one node, the one
// Prioritize would give its top score, instead of every node where it fits. kube-scheduler
// then binds the pod there without scoring (it skips scoring when one node is left), which
// saves it the prioritize call and its own scoring of every candidate: the serial part of its
// cycle that bounds throughput. Its own scores (preferred affinities, spreading) then no longer
// apply to gpu-mem pods; with the shipped weight of 100 they could overrule the extender's
// choice only in rare cases anyway. When the pod fits no node, Filter says why for each node
// as without it.
func WithFilterChoosing(on bool) Option { return func(o *options) { o.ext.filterChooses = on } }

// WithLeadership makes the extender bind only while l says it leads.
func WithLeadership(l server.Leadership) Option { return func(o *options) { o.ext.leadership = l } }

// WithPreemption turns the extender's GPU preemption on or off (on by default).
func WithPreemption(on bool) Option { return func(o *options) { o.preempt.Enabled = on } }

// WithHoldKey sets the key that signs and verifies preemption holds (preempt.LoadHoldKey);
// replicas must share it for a new leader or a restarted extender to honour the holds written
// before. Without it the extender signs with a random key of its own process.
func WithHoldKey(key []byte) Option {
	return func(o *options) { o.preempt.HoldKey = append([]byte(nil), key...) }
}

// NewExtender returns an extender over c that binds through client.
func NewExtender(c cache.Cache, client kubernetes.Interface, policy placement.Policy, names contract.Names, opts ...Option) *Extender {
	e := &Extender{cache: c, client: client, policy: policy, names: names, now: time.Now, metrics: NewMetrics(),
		settleOpts: DefaultSettleOptions(), verbs: verbTable()}
	o := options{ext: e, preempt: preempt.Config{Enabled: true}}
	for _, opt := range opts {
		opt(&o)
	}
	e.placer = policy
	if e.dra {
		e.useDRA()
	}
	e.fence = fence.NewWriter(client, e.leadership)
	cfg := o.preempt
	cfg.Client, cfg.Pods, cfg.Leadership, cfg.Names = client, e.pods, e.leadership, names
	cfg.Recorder, cfg.Now, cfg.Metrics = e.recorder, e.now, e.metrics.preempt
	cfg.Admits = func(pod *v1.Pod, req *contract.PodRequest, node *placement.NodeInfo) bool {
		return e.checkBind(pod, req, node.Name, node, true) == nil
	}
	e.preempt = preempt.New(cfg)
	e.holds = e.preempt.Holds()
	return e
}

// Policy returns the extender's placement policy.
func (e *Extender) Policy() placement.Policy { return e.policy }

// Metrics returns the extender's counters.
func (e *Extender) Metrics() *Metrics { return e.metrics }

// Cache returns the extender's cache (read-only use: inspect).
func (e *Extender) Cache() cache.Cache { return e.cache }

// RebuildHolds puts in force the preemption holds the API's pods carry (a restarted extender;
// preempt.Preemptor.RebuildHolds). Call it once the informers have synced.
func (e *Extender) RebuildHolds(logger klog.Logger) error { return e.preempt.RebuildHolds(logger) }
