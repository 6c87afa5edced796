package preempt

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/events"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/scheduler/fence"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

// Event reasons of preemption.
const (
	// ReasonPreempting: a pod evicts pods from a card to fit there (on the preemptor).
	ReasonPreempting = "GPUPreempting"
	// ReasonPreempted: a pod is evicted so that a higher-priority pod fits its card (on the victim).
	ReasonPreempted = "GPUPreempted"
	// ReasonPreemptionFailed: a pod that fits no card cannot preempt, and why.
	ReasonPreemptionFailed = "GPUPreemptionFailed"
)

// DefaultHoldSlack is how long a hold outlasts its victims' longest grace period.
const DefaultHoldSlack = time.Minute

// MaxHold bounds any hold: a preemptor not bound by then competes like any other pod.
const MaxHold = 10 * time.Minute

// ProtectedPriority is the lowest priority the extender never preempts: the highest a user's
// PriorityClass may have (1000000000) and the system classes above it (system-cluster-critical,
// system-node-critical). config/admission/extender-pods.yaml refuses the extender's deletion of
// such a pod, so the planner does not choose one.
const ProtectedPriority int32 = 1_000_000_000

// View is the cache's nodes as the preemptor sees them: the view the extender's verbs place
// through (its holds overlay: other pods' holds count as used on their cards, the preemptor's
// own do not). A View is of one pod, the preemptor.
type View interface {
	// Node is the snapshot of node name; false when the cache does not know it.
	Node(name string) (*placement.NodeInfo, bool)
	// Visit calls fn with the snapshot of each of names (nil for a node the cache does not know).
	Visit(names []string, fn func(i int, node *placement.NodeInfo))
	// VisitAll calls fn with the snapshot of every node the cache knows.
	VisitAll(fn func(node *placement.NodeInfo))
}

// Config is what a Preemptor works with. Client and Names are required.
type Config struct {
	// Enabled turns GPU preemption on. Off, nothing is preempted and no hold is rebuilt or
	// swept: the holds stay empty.
	Enabled bool
	// HoldKey signs and verifies the holds (LoadHoldKey); replicas must share it for a new
	// leader or a restarted extender to honour the holds written before. Empty: a random key
	// of this process.
	HoldKey []byte
	// Client reaches the API server: dry-run evictions, pod reads, the holds' patches and the
	// victims' deletes.
	Client kubernetes.Interface
	// Pods, if set, are the API's pods as the informer has them: pods are read there first,
	// and the holds are rebuilt and swept from them.
	Pods corelisters.PodLister
	// Leadership, if set, says whether this replica leads: only the leader preempts, writes
	// under its fence, and rebuilds the holds when it starts to lead. Nil: leader election is
	// off.
	Leadership server.Leadership
	// Names are the resource and annotation names (the hold's annotation, the unit label).
	Names contract.Names
	// Recorder, if set, records the preemption events (Reason*).
	Recorder events.EventRecorder
	// Now is the clock of the holds and of the events' spacing; nil: time.Now.
	Now func() time.Time
	// Metrics are the counters preemption adds to; nil: counters of its own, not registered.
	Metrics *Metrics
	// Admits, if set, reports whether pod may go to node as the extender's bind checks it (CPU,
	// memory, node selector, affinity, tolerations): asked of nodes kube-scheduler did not
	// offer, where the pod might fit without preempting. Nil admits every node.
	Admits func(pod *v1.Pod, req *contract.PodRequest, node *placement.NodeInfo) bool
}

// Preemptor preempts for pods that fit no card and keeps the holds of the cards it frees.
// Safe for concurrent use.
type Preemptor struct {
	enabled    bool
	client     kubernetes.Interface
	pods       corelisters.PodLister
	leadership server.Leadership
	fence      fence.Writer
	names      contract.Names
	recorder   events.EventRecorder
	now        func() time.Time
	metrics    *Metrics
	admits     func(*v1.Pod, *contract.PodRequest, *placement.NodeInfo) bool
	// key signs and verifies the holds (hold_mac.go).
	key []byte
	// holds are the holds in force; preempting marks the pods whose preemption is in
	// progress, failures when each pod last got a GPUPreemptionFailed event of a reason, and
	// deferred when each pod's preemption was first put off (plan.go).
	holds      *Holds
	preempting sync.Map
	failures   sync.Map
	deferred   sync.Map
	// planning serialises planning a preemption with writing its hold and putting it in force
	// (plan.go), so that each plan sees the holds of the plans before it: a semaphore of one,
	// which a caller stops waiting for when its context ends. It guards no data of its own.
	planning chan struct{}
	// led is whether this replica led at the last look (a new leader rebuilds the holds);
	// swept when the holds were last checked against the API's pods (unix nanoseconds).
	led   atomic.Bool
	swept atomic.Int64
}

// New returns a Preemptor configured by cfg.
func New(cfg Config) *Preemptor {
	p := &Preemptor{enabled: cfg.Enabled, client: cfg.Client, pods: cfg.Pods, leadership: cfg.Leadership,
		fence: fence.NewWriter(cfg.Client, cfg.Leadership), names: cfg.Names, recorder: cfg.Recorder,
		now: cfg.Now, metrics: cfg.Metrics, admits: cfg.Admits, planning: make(chan struct{}, 1)}
	if p.now == nil {
		p.now = time.Now
	}
	if p.metrics == nil {
		p.metrics = NewMetrics()
	}
	if p.admits == nil {
		p.admits = func(*v1.Pod, *contract.PodRequest, *placement.NodeInfo) bool { return true }
	}
	p.key = append([]byte(nil), cfg.HoldKey...)
	if len(p.key) == 0 {
		p.key = randomHoldKey()
	}
	p.holds = newHolds(p.now)
	return p
}

// Enabled reports whether GPU preemption is on.
func (p *Preemptor) Enabled() bool { return p.enabled }

// Holds are the holds in force, which every verb's view of the cache overlays.
func (p *Preemptor) Holds() *Holds { return p.holds }

// backgroundTimeout bounds a preemption started by filter (its API calls).
const backgroundTimeout = 30 * time.Second

// InBackground starts a GPU preemption for pod, which fits none of names, over the nodes where
// only the cards' free memory stood in the way (failures[i] not unresolvable), as view shows
// them: filter answers at once, and kube-scheduler retries the pod once the victims are gone.
// It does nothing while preemption is off. Filter calls it only for a pod without a hold (a
// held pod waits for its victims); Preempt checks again.
func (p *Preemptor) InBackground(ctx context.Context, pod *v1.Pod, req *contract.PodRequest, names []string, failures []*placement.FitError, view View) {
	if !p.enabled {
		return
	}
	var candidates []string
	for i, fe := range failures {
		if fe != nil && !fe.Unresolvable {
			candidates = append(candidates, names[i]) // a copy: names go back to their pool
		}
	}
	if len(candidates) == 0 {
		return
	}
	r := *req
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), backgroundTimeout)
	go func() {
		defer cancel()
		p.Preempt(ctx, pod, &r, candidates, view)
	}()
}
