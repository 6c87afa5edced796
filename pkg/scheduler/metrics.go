package scheduler

import (
	"fmt"
	"io"
	"sync/atomic"
)

// Metrics counts the extender's calls; WriteTo renders them in Prometheus text format.
type Metrics struct {
	filters, prioritizes, binds, bindFailures, preempts atomic.Int64
	// unsettled counts Binding failures with an unknown outcome; settledBound and
	// settledReleased how they were settled.
	unsettled, settledBound, settledReleased atomic.Int64
	// unauthenticated counts requests refused for want of a verified client certificate.
	unauthenticated atomic.Int64
}

// NewMetrics returns zeroed counters.
func NewMetrics() *Metrics { return &Metrics{} }

// WriteTo writes the counters in the Prometheus text exposition format.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	var total int64
	for _, c := range []struct {
		name, help string
		v          int64
	}{
		{"gpushare_filter_total", "Filter calls answered.", m.filters.Load()},
		{"gpushare_prioritize_total", "Prioritize calls answered.", m.prioritizes.Load()},
		{"gpushare_bind_total", "Pods bound.", m.binds.Load()},
		{"gpushare_bind_failures_total", "Bind calls that failed (a failure of unknown outcome keeps its charge until settled).", m.bindFailures.Load()},
		{"gpushare_preempt_total", "Preempt calls answered.", m.preempts.Load()},
		{"gpushare_bind_unknown_outcome_total", "Binding calls that failed without saying whether the pod was bound (the charge is kept and settled).", m.unsettled.Load()},
		{"gpushare_bind_settled_bound_total", "Binds of unknown outcome settled as bound.", m.settledBound.Load()},
		{"gpushare_bind_settled_released_total", "Binds of unknown outcome settled as not bound (charge released).", m.settledReleased.Load()},
		{"gpushare_unauthenticated_requests_total", "Requests refused because they carried no client certificate the extender verified.", m.unauthenticated.Load()},
	} {
		n, err := fmt.Fprintf(w, "# HELP %s %s\n# TYPE %s counter\n%s %d\n", c.name, c.help, c.name, c.name, c.v)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}
