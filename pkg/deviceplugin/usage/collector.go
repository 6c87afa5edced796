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
		"GPU memory the container asked (its gpu-mem units); 0 for a container using a GPU without asking.", []string{"namespace", "pod", "container"}, nil)
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
)

var _ prometheus.Collector = (*Sampler)(nil)

// Describe sends the descriptions of the sampler's metrics.
func (s *Sampler) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCardUsed, descCardTotal, descCardUtil, descCardOutside,
		descContainerUsed, descContainerRequested, descContainerOver, descContainerLimit, descEnforcement, descSampleTime, descSampleErrors} {
		ch <- d
	}
}

// Collect sends the last reading: one consistent snapshot per scrape.
func (s *Sampler) Collect(ch chan<- prometheus.Metric) {
	s.mu.Lock()
	snap, errs := s.last, s.errors
	s.mu.Unlock()
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
