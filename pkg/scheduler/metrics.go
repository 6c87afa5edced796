package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the extender's counters and latency histograms, in a registry of their own (no
// global state: tests and several extenders in one process do not share them). The state
// the cache holds (cards, pods, leadership) is collected at scrape time by stateCollector.
type Metrics struct {
	registry                                            *prometheus.Registry
	filters, prioritizes, binds, bindFailures, preempts prometheus.Counter
	// unsettled counts Binding failures with an unknown outcome; settledBound and
	// settledReleased how they were settled.
	unsettled, settledBound, settledReleased prometheus.Counter
	// rollbacks counts charges released because the Binding was refused.
	rollbacks prometheus.Counter
	// fenceRefused counts Bindings the API server refused at the fence (a stale term's token).
	fenceRefused prometheus.Counter
	// unauthenticated counts requests refused for want of a verified client certificate.
	unauthenticated prometheus.Counter
	// eventsDropped counts GPUAssigned events not recorded for being over the event rate.
	eventsDropped prometheus.Counter
	// duration is each verb's handling time, by verb.
	duration *prometheus.HistogramVec
	// unfit counts the nodes filter turned away, by reason.
	unfit *prometheus.CounterVec
	// forwards counts a follower's verbs by outcome: forwarded to the leader, failed
	// forwarding attempts, answered locally.
	forwards *prometheus.CounterVec
	// preemptions counts GPU preemptions started, preemptionsFailed the pods told they cannot
	// preempt, victims the pods evicted and unitsEvicted their units on the freed cards.
	preemptions, preemptionsFailed, victims, unitsEvicted prometheus.Counter
	// holdsIgnored counts the hold annotations not honoured because their MAC did not verify.
	holdsIgnored prometheus.Counter
}

// NewMetrics returns zeroed metrics in a registry of their own.
func NewMetrics() *Metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &Metrics{
		registry:          prometheus.NewRegistry(),
		filters:           counter("gpushare_filter_total", "Filter calls answered."),
		prioritizes:       counter("gpushare_prioritize_total", "Prioritize calls answered."),
		binds:             counter("gpushare_bind_total", "Pods bound."),
		bindFailures:      counter("gpushare_bind_failures_total", "Bind calls that failed (a failure of unknown outcome keeps its charge until settled)."),
		preempts:          counter("gpushare_preempt_total", "Preempt calls answered."),
		unsettled:         counter("gpushare_bind_unknown_outcome_total", "Binding calls that failed without saying whether the pod was bound (the charge is kept and settled)."),
		settledBound:      counter("gpushare_bind_settled_bound_total", "Binds of unknown outcome settled as bound."),
		settledReleased:   counter("gpushare_bind_settled_released_total", "Binds of unknown outcome settled as not bound (charge released)."),
		rollbacks:         counter("gpushare_bind_rollbacks_total", "Charges released because the API server refused the pod's Binding."),
		fenceRefused:      counter("gpushare_bind_fence_refused_total", "Bindings the API server refused at the fence (policy gpushare-extender-fence): sent under a term of the Lease that had ended; the charge is released."),
		unauthenticated:   counter("gpushare_unauthenticated_requests_total", "Requests refused because they carried no client certificate the extender verified."),
		preemptions:       counter("gpushare_preemptions_total", "GPU preemptions started: a hold written and at least one victim evicted for it (plans and holds that evict nothing do not count)."),
		holdsIgnored:      counter("gpushare_preemption_holds_ignored_total", "Preemption hold annotations ignored because their MAC did not verify under the extender's key (written by hand, or under a key no longer in use), once per pod."),
		preemptionsFailed: counter("gpushare_preemptions_failed_total", "Pods that fit no card and could not preempt (policy Never, no lower-priority pod frees a card, PodDisruptionBudgets), at most one a minute per pod and reason."),
		victims:           counter("gpushare_preemption_victims_total", "Pods evicted by GPU preemption."),
		unitsEvicted:      counter("gpushare_preemption_evicted_units_total", "GPU memory units the evicted pods held on the freed cards."),
		eventsDropped:     counter("gpushare_events_dropped_total", "GPUAssigned events not recorded because binds outpaced --event-qps (the pods' annotations name their cards all the same)."),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "gpushare_extender_request_duration_seconds",
			Help:    "Time to answer a kube-scheduler call, by verb (filter, prioritize, bind, preempt), body decoding and answer included.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"verb"}),
		unfit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpushare_filter_unfit_nodes_total",
			Help: "Nodes filter turned away, by reason: no_free_block, unresolvable, invalid_request.",
		}, []string{"reason"}),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gpushare_forwarded_requests_total",
			Help: "Verbs a follower was sent, by verb and outcome: forwarded (the leader answered), failed (one forwarding attempt failed; a bind tries again), answered_locally (no leader could be reached: filter, prioritize and preempt from this replica's cache; a bind refused unless this replica leads by then).",
		}, []string{"verb", "outcome"}),
	}
	m.registry.MustRegister(m.filters, m.prioritizes, m.binds, m.bindFailures, m.preempts, m.unsettled,
		m.settledBound, m.settledReleased, m.rollbacks, m.fenceRefused, m.unauthenticated, m.eventsDropped, m.duration, m.unfit, m.forwards,
		m.preemptions, m.preemptionsFailed, m.victims, m.unitsEvicted, m.holdsIgnored)
	return m
}

// Registry is where the metrics are registered; /metrics serves it with the cache's state.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Reasons of gpushare_filter_unfit_nodes_total.
const (
	// UnfitNoFreeBlock: the node's cards are big enough but their free memory is not (pods
	// leaving, or preemption, would make room).
	UnfitNoFreeBlock = "no_free_block"
	// UnfitUnresolvable: no card, too few cards, cards too small, of another model or
	// unhealthy, or a node the extender does not know.
	UnfitUnresolvable = "unresolvable"
	// UnfitInvalidRequest: the pod's gpu-mem request is invalid (every node counts).
	UnfitInvalidRequest = "invalid_request"
)
