package preempt

import "github.com/prometheus/client_golang/prometheus"

// Metrics are preemption's counters. The extender registers them beside its own
// (Collectors), so that /metrics shows them as one family each, under the same names.
type Metrics struct {
	// preemptions counts GPU preemptions started, failed the pods told they cannot preempt,
	// victims the pods evicted and unitsEvicted their units on the freed cards.
	preemptions, failed, victims, unitsEvicted prometheus.Counter
	// holdsIgnored counts the hold annotations not honoured because their MAC did not verify.
	holdsIgnored prometheus.Counter
}

// NewMetrics returns zeroed counters, registered nowhere.
func NewMetrics() *Metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	return &Metrics{
		preemptions:  counter("gpushare_preemptions_total", "GPU preemptions started: a hold written and at least one victim evicted for it (plans and holds that evict nothing do not count)."),
		holdsIgnored: counter("gpushare_preemption_holds_ignored_total", "Preemption hold annotations ignored because their MAC did not verify under the extender's key (written by hand, or under a key no longer in use), once per pod."),
		failed:       counter("gpushare_preemptions_failed_total", "Pods that fit no card and could not preempt (policy Never, no lower-priority pod frees a card, PodDisruptionBudgets), at most one a minute per pod and reason."),
		victims:      counter("gpushare_preemption_victims_total", "Pods evicted by GPU preemption."),
		unitsEvicted: counter("gpushare_preemption_evicted_units_total", "GPU memory units the evicted pods held on the freed cards."),
	}
}

// Collectors are the counters, to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.preemptions, m.failed, m.victims, m.unitsEvicted, m.holdsIgnored}
}
