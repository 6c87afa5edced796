package usage

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpushare/gpushare/pkg/contract"
)

// Metric descriptions. Card metrics carry the card's NVML index, UUID and model; container
// metrics its namespace, pod and container (and the card, for memory used on one card).
var (
	cardLabels = []string{"gpu", "uuid", "model"}

	descCardUsed = prometheus.NewDesc("gpushare_gpu_memory_used_bytes",
		"GPU memory in use on the card (NVML), by every process and the driver.", cardLabels, nil)
	descCardTotal = prometheus.NewDesc("gpushare_gpu_memory_total_bytes",
		"GPU memory of the card (NVML).", cardLabels, nil)
	descCardUtil = prometheus.NewDesc("gpushare_gpu_utilization_ratio",
		"Share of the last NVML sample period in which a kernel ran on the card (0-1); absent when the card does not report it.", cardLabels, nil)
	descCardOutside = prometheus.NewDesc("gpushare_gpu_memory_outside_pods_bytes",
		"GPU memory of the card's processes that run in no container of the node's pods (host processes).", cardLabels, nil)
	descContainerUsed = prometheus.NewDesc("gpushare_container_gpu_memory_used_bytes",
		"GPU memory the container's processes use on the card.", []string{"namespace", "pod", "container", "gpu_uuid"}, nil)
	descContainerRequested = prometheus.NewDesc("gpushare_container_gpu_memory_requested_bytes",
		"GPU memory the container asked (its gpu-mem units; on a DRA node, the memory of its claims); 0 for a container using a GPU without asking.", []string{"namespace", "pod", "container"}, nil)
	descContainerOver = prometheus.NewDesc("gpushare_container_gpu_memory_over_request_bytes",
		"GPU memory the container uses beyond what it asked, over all its cards (0 when within its ask).", []string{"namespace", "pod", "container"}, nil)
	descContainerLimit = prometheus.NewDesc("gpushare_container_gpu_memory_limit_bytes",
		"GPU memory the container may use on the card, enforced by HAMi-core (absent where the node enforces no limit).", []string{"namespace", "pod", "container", "gpu_uuid"}, nil)
	descEnforcement = prometheus.NewDesc("gpushare_memory_enforcement",
		"1 for the node's GPU memory limit mode: mode is what containers get (hami-core, none, or unavailable: asked for but the library is missing or unusable), configured what --memory-limit asked.", []string{"mode", "configured"}, nil)
	descSampleTime = prometheus.NewDesc("gpushare_usage_last_sample_timestamp_seconds",
		"Unix time of the last GPU usage reading.", nil, nil)
	descSampleErrors = prometheus.NewDesc("gpushare_usage_sample_errors_total",
		"GPU usage readings that failed or left a card out.", nil, nil)
	descEscapes = prometheus.NewDesc("gpushare_container_limit_escapes_total",
		"Times the container escaped its GPU memory limit, seen from the host: kind over_limit (its processes on a card use more than its limit plus the CUDA context allowance), no_hami_core (a GPU process does not map HAMi-core) or preload_changed (a process does not see the plugin's /etc/ld.so.preload or library: a symlink, a mount over them, a mount namespace of its own). A reading counts when it finds an offending process not seen before; forgotten when the pod leaves the node.",
		[]string{"namespace", "pod", "container", "kind"}, nil)
	descEscapeActions = prometheus.NewDesc("gpushare_limit_escape_actions_total",
		"Processes of escaped containers acted on (--limit-escape-action), by result: killed, gone (exited or no longer in the container before the signal) or failed.",
		[]string{"action", "result"}, nil)
	descEscapeCheckErrors = prometheus.NewDesc("gpushare_limit_escape_check_errors_total",
		"GPU processes of limited containers whose memory maps could not be read (so not checked for HAMi-core).", nil, nil)
)

var _ prometheus.Collector = (*Sampler)(nil)

// Describe sends the descriptions of the sampler's metrics.
func (s *Sampler) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCardUsed, descCardTotal, descCardUtil, descCardOutside,
		descContainerUsed, descContainerRequested, descContainerOver, descContainerLimit, descEnforcement, descSampleTime, descSampleErrors,
		descEscapes, descEscapeActions, descEscapeCheckErrors} {
		ch <- d
	}
}

// Collect sends the last reading: one consistent snapshot per scrape.
func (s *Sampler) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	snap, errs, escapes := s.last, s.errors, s.escapeMetrics()
	s.mu.Unlock()
	for _, m := range escapes {
		ch <- m
	}
	ch <- prometheus.MustNewConstMetric(descSampleErrors, prometheus.CounterValue, errs)
	ch <- prometheus.MustNewConstMetric(descEnforcement, prometheus.GaugeValue, 1, orNone(s.cfg.MemoryLimit), orNone(s.cfg.MemoryLimitConfigured))
	if snap.Time.IsZero() {
		return
	}
	ch <- prometheus.MustNewConstMetric(descSampleTime, prometheus.GaugeValue, float64(snap.Time.UnixNano())/1e9)
	for _, c := range snap.Cards {
		labels := []string{strconv.Itoa(c.Device.Index), c.Device.UUID, c.Device.Model}
		ch <- prometheus.MustNewConstMetric(descCardUsed, prometheus.GaugeValue, float64(c.UsedBytes), labels...)
		ch <- prometheus.MustNewConstMetric(descCardTotal, prometheus.GaugeValue, float64(c.Device.MemoryBytes), labels...)
		ch <- prometheus.MustNewConstMetric(descCardOutside, prometheus.GaugeValue, float64(c.OutsidePodsBytes), labels...)
		if c.Utilization >= 0 {
			ch <- prometheus.MustNewConstMetric(descCardUtil, prometheus.GaugeValue, float64(c.Utilization)/100, labels...)
		}
	}
	for i := range snap.Containers {
		c := &snap.Containers[i]
		for uuid, b := range c.UsedBytes {
			ch <- prometheus.MustNewConstMetric(descContainerUsed, prometheus.GaugeValue, float64(b), c.Namespace, c.Pod, c.Container, uuid)
		}
		ch <- prometheus.MustNewConstMetric(descContainerRequested, prometheus.GaugeValue, float64(c.RequestedBytes), c.Namespace, c.Pod, c.Container)
		ch <- prometheus.MustNewConstMetric(descContainerOver, prometheus.GaugeValue, float64(c.OverBytes()), c.Namespace, c.Pod, c.Container)
	}
	for _, l := range snap.Limits {
		ch <- prometheus.MustNewConstMetric(descContainerLimit, prometheus.GaugeValue, float64(l.Bytes), l.Namespace, l.Pod, l.Container, l.UUID)
	}
}

// orNone reads an unset mode as none.
func orNone(mode string) string {
	if mode == "" {
		return contract.MemoryLimitNone
	}
	return mode
}

// escapeMetrics are the escape counters where escapes are policed; the caller holds s.mu.
func (s *Sampler) escapeMetrics() []prometheus.Metric {
	if s.cfg.Escapes == nil || !s.enforcing() {
		return nil
	}
	st := &s.escapes
	out := []prometheus.Metric{prometheus.MustNewConstMetric(descEscapeCheckErrors, prometheus.CounterValue, st.checkErrors)}
	for k, c := range st.counts {
		out = append(out, prometheus.MustNewConstMetric(descEscapes, prometheus.CounterValue, c.n, c.namespace, c.pod, c.container, k.kind))
	}
	for k, n := range st.actions {
		out = append(out, prometheus.MustNewConstMetric(descEscapeActions, prometheus.CounterValue, n, k.action, k.result))
	}
	return out
}
