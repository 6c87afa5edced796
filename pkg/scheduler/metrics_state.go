package scheduler

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/placement"
)

// stateCollector exposes what the extender's cache holds, read at scrape time from its
// snapshots (nothing is updated per event): every card's capacity, allocated memory and pods,
// the cache's size, cards over capacity, and whether this replica binds. At 5,000 nodes of 8
// cards that is 120,000 card series per scrape.
type stateCollector struct {
	ext                                        *Extender
	capacity, allocated, cardPods              *prometheus.Desc
	nodes, pods, overcommitted, leader, usable *prometheus.Desc
	learnedShapes, learnedTypical              *prometheus.Desc
}

var _ prometheus.Collector = (*stateCollector)(nil)

func newStateCollector(ext *Extender) *stateCollector {
	card := []string{"node", "card"}
	return &stateCollector{
		ext:           ext,
		capacity:      prometheus.NewDesc("gpushare_card_capacity_bytes", "GPU memory of a card the extender schedules onto (healthy or not).", []string{"node", "card", "model"}, nil),
		allocated:     prometheus.NewDesc("gpushare_card_allocated_bytes", "GPU memory of a card held by the pods placed on it (assumed or bound).", card, nil),
		cardPods:      prometheus.NewDesc("gpushare_card_pods", "Pods holding GPU memory on a card.", card, nil),
		usable:        prometheus.NewDesc("gpushare_card_healthy", "1 when the card is healthy (the share-plugin's report), else 0.", card, nil),
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
	for _, d := range []*prometheus.Desc{s.capacity, s.allocated, s.cardPods, s.usable, s.nodes, s.pods, s.overcommitted, s.leader,
		s.learnedShapes, s.learnedTypical} {
		ch <- d
	}
}

// Collect reads the cache's snapshots.
func (s *stateCollector) Collect(ch chan<- prometheus.Metric) {
	nodes := s.ext.cache.Nodes()
	unit := float64(s.ext.names.UnitBytes())
	pods := 0
	var perCard map[int]int
	for _, n := range nodes {
		pods += len(n.Pods)
		clear(perCard)
		if perCard == nil {
			perCard = map[int]int{}
		}
		for i := range n.Pods {
			for g := range n.Pods[i].Allocation.PerGPU() {
				perCard[g]++
			}
		}
		for _, g := range n.GPUs {
			idx := strconv.Itoa(g.Index)
			ch <- prometheus.MustNewConstMetric(s.capacity, prometheus.GaugeValue, float64(g.Capacity)*unit, n.Name, idx, g.Model)
			ch <- prometheus.MustNewConstMetric(s.allocated, prometheus.GaugeValue, float64(g.Used)*unit, n.Name, idx)
			ch <- prometheus.MustNewConstMetric(s.cardPods, prometheus.GaugeValue, float64(perCard[g.Index]), n.Name, idx)
			ch <- prometheus.MustNewConstMetric(s.usable, prometheus.GaugeValue, boolValue(g.Healthy), n.Name, idx)
		}
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
