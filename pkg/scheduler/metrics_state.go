package scheduler

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/placement"
)

// stateCollector exposes what the extender's cache holds, read at scrape time from its
// snapshots (nothing is updated per event): the cache's size, cards over capacity, whether
// this replica binds and what a learning policy has learned. The per-card series (160,000 at
// 5,000 nodes of 8 cards) are written by metricsHandler, not through a collector.
type stateCollector struct {
	ext                                *Extender
	nodes, pods, overcommitted, leader *prometheus.Desc
	learnedShapes, learnedTypical      *prometheus.Desc
}

var _ prometheus.Collector = (*stateCollector)(nil)

func newStateCollector(ext *Extender) *stateCollector {
	return &stateCollector{
		ext:           ext,
		nodes:         prometheus.NewDesc("gpushare_cache_nodes", "Nodes in the extender's cache.", nil, nil),
		pods:          prometheus.NewDesc("gpushare_cache_pods", "Pods holding GPU memory in the extender's cache.", nil, nil),
		overcommitted: prometheus.NewDesc("gpushare_overcommitted_cards", "Cards whose pods hold more GPU memory than the card has, in the extender's cache.", nil, nil),
		leader:        prometheus.NewDesc("gpushare_leader", "1 when this replica binds (it leads, or runs without leader election), else 0.", nil, nil),
		learnedShapes: prometheus.NewDesc("gpushare_policy_learned_task_shapes",
			"Task shapes (GPUs, memory per GPU, models, CPU) a learning policy (fgd-online) remembers from the pods it placed.", []string{"policy"}, nil),
		learnedTypical: prometheus.NewDesc("gpushare_policy_typical_task_types",
			"Task types in the typical set a learning policy scores nodes against (the most popular shapes covering most pods).", []string{"policy"}, nil),
	}
}

// Describe sends the descriptions of every metric.
func (s *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{s.nodes, s.pods, s.overcommitted, s.leader, s.learnedShapes, s.learnedTypical} {
		ch <- d
	}
}

// Collect reads the cache's snapshots.
func (s *stateCollector) Collect(ch chan<- prometheus.Metric) {
	nodes := s.ext.cache.Nodes()
	pods := 0
	for _, n := range nodes {
		pods += len(n.Pods)
	}
	ch <- prometheus.MustNewConstMetric(s.nodes, prometheus.GaugeValue, float64(len(nodes)))
	ch <- prometheus.MustNewConstMetric(s.pods, prometheus.GaugeValue, float64(pods))
	ch <- prometheus.MustNewConstMetric(s.overcommitted, prometheus.GaugeValue, float64(cache.OvercommittedCards(nodes)))
	ch <- prometheus.MustNewConstMetric(s.leader, prometheus.GaugeValue, boolValue(s.ext.Leading()))
	if r, ok := s.ext.policy.(placement.LearnedReporter); ok {
		shapes, typical := r.Learned()
		ch <- prometheus.MustNewConstMetric(s.learnedShapes, prometheus.GaugeValue, float64(shapes), r.Name())
		ch <- prometheus.MustNewConstMetric(s.learnedTypical, prometheus.GaugeValue, float64(typical), r.Name())
	}
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
