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

	"github.com/gpushare/gpushare/pkg/placement"
)

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
