package scheduler

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/cache"
	"github.com/gpushare/gpushare/pkg/placement"
	"github.com/gpushare/gpushare/pkg/scheduler/preempt"
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
	// preempt are preemption's counters (started, failed, victims, units evicted, holds
	// ignored), registered here beside the verbs'.
	preempt *preempt.Metrics
}

// NewMetrics returns zeroed metrics in a registry of their own.
func NewMetrics() *Metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &Metrics{
		registry:        prometheus.NewRegistry(),
		filters:         counter("gpushare_filter_total", "Filter calls answered."),
		prioritizes:     counter("gpushare_prioritize_total", "Prioritize calls answered."),
		binds:           counter("gpushare_bind_total", "Pods bound."),
		bindFailures:    counter("gpushare_bind_failures_total", "Bind calls that failed (a failure of unknown outcome keeps its charge until settled)."),
		preempts:        counter("gpushare_preempt_total", "Preempt calls answered."),
		unsettled:       counter("gpushare_bind_unknown_outcome_total", "Binding calls that failed without saying whether the pod was bound (the charge is kept and settled)."),
		settledBound:    counter("gpushare_bind_settled_bound_total", "Binds of unknown outcome settled as bound."),
		settledReleased: counter("gpushare_bind_settled_released_total", "Binds of unknown outcome settled as not bound (charge released)."),
		rollbacks:       counter("gpushare_bind_rollbacks_total", "Charges released because the API server refused the pod's Binding."),
		fenceRefused:    counter("gpushare_bind_fence_refused_total", "Bindings the API server refused at the fence (policy gpushare-extender-fence): sent under a term of the Lease that had ended; the charge is released."),
		unauthenticated: counter("gpushare_unauthenticated_requests_total", "Requests refused because they carried no client certificate the extender verified."),
		preempt:         preempt.NewMetrics(),
		eventsDropped:   counter("gpushare_events_dropped_total", "GPUAssigned events not recorded because binds outpaced --event-qps (the pods' annotations name their cards all the same)."),
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
		m.settledBound, m.settledReleased, m.rollbacks, m.fenceRefused, m.unauthenticated, m.eventsDropped, m.duration, m.unfit, m.forwards)
	m.registry.MustRegister(m.preempt.Collectors()...)
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

// metricsHandler serves /metrics in Prometheus's text format: the registries' metrics, then
// every card's series written straight from the cache's snapshots. Through client_golang's
// registry each card series costs about a kilobyte per scrape (a metric object, its label
// pairs, sorting): at 5,000 nodes of 8 cards, 160,000 series and some 180 MB of heap every
// scrape (`make bench-scale`). Written as text they cost the bytes of the answer.
//
// /metrics needs no client certificate, so repeated scrapes must stay cheap: eight scrapers at
// 800 cards raised filter's median from 3 to 14 ms. The answer is rendered (and compressed)
// at most once per ttl and the same bytes served to every scrape until then; values are at
// most ttl old.
type metricsHandler struct {
	gatherer prometheus.Gatherer
	ext      *Extender
	logger   klog.Logger
	ttl      time.Duration
	// mu guards body, the last rendering (gzip), and renderedAt, when it was made.
	mu         sync.Mutex
	body       []byte
	renderedAt time.Time
}

// DefaultMetricsTTL is how long one rendering of /metrics is served: far below any scrape
// interval, so a scraper sees fresh values, while any number of scrapers cost one rendering a
// second.
const DefaultMetricsTTL = time.Second

// cardFamily is one per-card metric.
type cardFamily struct {
	name, help string
	model      bool // the series carries the card's model as a label
	value      func(g *placement.GPUInfo, pods int, unit float64) float64
}

// cardFamilies are the per-card metrics, in the order they are written.
var cardFamilies = []cardFamily{
	{name: "gpushare_card_capacity_bytes", help: "GPU memory of a card the extender schedules onto (healthy or not).", model: true,
		value: func(g *placement.GPUInfo, _ int, unit float64) float64 { return float64(g.Capacity) * unit }},
	{name: "gpushare_card_allocated_bytes", help: "GPU memory of a card held by the pods placed on it (assumed or bound).",
		value: func(g *placement.GPUInfo, _ int, unit float64) float64 { return float64(g.Used) * unit }},
	{name: "gpushare_card_pods", help: "Pods holding GPU memory on a card.",
		value: func(_ *placement.GPUInfo, pods int, _ float64) float64 { return float64(pods) }},
	{name: "gpushare_card_healthy", help: "1 when the card is healthy (the share-plugin's report), else 0.",
		value: func(g *placement.GPUInfo, _ int, _ float64) float64 { return boolValue(g.Healthy) }},
}

func (m *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	body := m.rendered()
	if acceptsGzip(r) {
		w.Header().Set("Content-Encoding", "gzip")
		if _, err := w.Write(body); err != nil {
			m.logger.V(2).Info("Writing metrics", "err", err)
		}
		return
	}
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err == nil {
		_, err = io.Copy(w, zr) //nolint:gosec // G110: our own rendering, not a client's body
	}
	if err != nil {
		m.logger.V(2).Info("Writing metrics", "err", err)
	}
}

// rendered returns the gzip-compressed metrics, rendered again when the last rendering is
// MetricsTTL old. Concurrent scrapes wait for one rendering. The bytes must not be modified.
func (m *metricsHandler) rendered() []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if now := time.Now(); m.body == nil || m.ttl <= 0 || now.Sub(m.renderedAt) >= m.ttl {
		m.body, m.renderedAt = m.render(), now
	}
	return m.body
}

// render writes the registries' metrics and every card's series, gzip-compressed (at 800
// cards 202 KB of text become about a tenth of that).
func (m *metricsHandler) render() []byte {
	families, err := m.gatherer.Gather()
	if err != nil { // as promhttp's ContinueOnError: serve what was gathered
		m.logger.Error(err, "Gathering metrics")
	}
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed) // a valid level: no error
	bw := bufio.NewWriterSize(gz, 64<<10)
	enc := expfmt.NewEncoder(bw, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range families {
		if err := enc.Encode(mf); err != nil {
			m.logger.Error(err, "Rendering metrics", "family", mf.GetName())
		}
	}
	if err := writeCardMetrics(bw, m.ext.cache.Nodes(), float64(m.ext.names.UnitBytes())); err != nil {
		m.logger.Error(err, "Rendering card metrics")
	}
	if err := bw.Flush(); err != nil {
		m.logger.Error(err, "Rendering metrics")
	}
	if err := gz.Close(); err != nil {
		m.logger.Error(err, "Rendering metrics")
	}
	return buf.Bytes()
}

// acceptsGzip reports whether the request accepts a gzip-encoded answer.
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		if enc, _, _ := strings.Cut(strings.TrimSpace(part), ";"); enc == "gzip" {
			return true
		}
	}
	return false
}

// writeCardMetrics writes cardFamilies for every card of nodes, in Prometheus's text format;
// unit is the bytes of one unit of gpu-mem.
func writeCardMetrics(w *bufio.Writer, nodes []*placement.NodeInfo, unit float64) error {
	perCard := map[int]int{}
	pods := make([][]int, len(nodes)) // pods per card, by node and card position
	for i, n := range nodes {
		clear(perCard)
		for j := range n.Pods {
			for g := range n.Pods[j].Allocation.PerGPU() {
				perCard[g]++
			}
		}
		pods[i] = make([]int, len(n.GPUs))
		for k := range n.GPUs {
			pods[i][k] = perCard[n.GPUs[k].Index]
		}
	}
	var line []byte
	for _, f := range cardFamilies {
		_, _ = w.WriteString("# HELP " + f.name + " " + f.help + "\n# TYPE " + f.name + " gauge\n")
		for i, n := range nodes {
			for k := range n.GPUs {
				g := &n.GPUs[k]
				line = append(line[:0], f.name...)
				line = append(line, `{card="`...)
				line = strconv.AppendInt(line, int64(g.Index), 10)
				if f.model {
					line = append(line, `",model="`...)
					line = appendLabelValue(line, g.Model)
				}
				line = append(line, `",node="`...)
				line = appendLabelValue(line, n.Name)
				line = append(line, `"} `...)
				line = appendValue(line, f.value(g, pods[i][k], unit))
				line = append(line, '\n')
				if _, err := w.Write(line); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// appendLabelValue appends v escaped as the text format's label values are: backslash, double
// quote and line feed.
func appendLabelValue(b []byte, v string) []byte {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// appendValue appends v as the text format writes a sample value.
func appendValue(b []byte, v float64) []byte {
	return strconv.AppendFloat(b, v, 'g', -1, 64)
}
