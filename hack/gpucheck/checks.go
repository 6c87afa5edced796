package main

import (
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/deviceplugin/usage"
)

// The sampler's metrics the check reads.
const (
	metricUsed  = "gpushare_container_gpu_memory_used_bytes"
	metricLimit = "gpushare_container_gpu_memory_limit_bytes"
)

// checkAllocate checks what one container was handed (Allocate's answer, or in DRA mode its
// claim's CDI edits): the card, its limit, and the library preloaded read-only.
func (r *checkRun) checkAllocate(a admitted) {
	envs := a.Response.GetEnvs()
	wantLimit := strconv.FormatInt(a.LimitBytes>>20, 10) + "m"
	limitEnv := deviceplugin.EnvMemoryLimit + "_0"
	var preload, library bool
	for _, m := range a.Response.GetMounts() {
		switch {
		case m.GetContainerPath() == deviceplugin.ContainerPreloadPath && m.GetReadOnly():
			data, err := os.ReadFile(m.GetHostPath())
			preload = err == nil && strings.TrimSpace(string(data)) == r.opts.library
		case m.GetContainerPath() == r.opts.library && m.GetReadOnly():
			library = true
		}
	}
	observed := fmt.Sprintf("%s=%s, %s=%s, %d mounts, preload naming the library read-only: %t, library read-only: %t",
		limitEnv, envs[limitEnv], contract.EnvVisibleDevices, envs[contract.EnvVisibleDevices], len(a.Response.GetMounts()), preload, library)
	r.res.add(name(a)+": "+a.via(), fmt.Sprintf("%s=%s, %s=%s, preload and library read-only", limitEnv, wantLimit,
		contract.EnvVisibleDevices, r.card.UUID), observed,
		envs[limitEnv] == wantLimit && envs[contract.EnvVisibleDevices] == r.card.UUID && preload && library)
}

// checkTogether checks that every container's process held memory on the card in one reading.
func (r *checkRun) checkTogether(adm []admitted, snap usage.Snapshot, sampleErr error, procs []*process) {
	check := modePrefix(adm) + "both containers on card 0 at once (one NVML reading)"
	want := fmt.Sprintf("%d container processes with memory on the card", len(r.opts.asks()))
	if sampleErr != nil {
		r.res.add(check, want, sampleErr.Error(), false)
		return
	}
	used := map[int]uint64{}
	for _, c := range snap.Cards {
		if c.Device.Index != checkCard {
			continue
		}
		for _, p := range c.Processes {
			if p.UsedKnown {
				used[int(p.PID)] = p.UsedBytes
			}
		}
	}
	var seen []string
	for _, p := range procs {
		if b, ok := used[p.pid()]; ok && b > 0 {
			seen = append(seen, fmt.Sprintf("%s pid %d: %s", p.name, p.pid(), mib(int64(b)))) //nolint:gosec // G115: GPU memory fits
		}
	}
	r.res.add(check, want, strings.Join(seen, "; "), len(seen) == len(r.opts.asks()))
}

// series is one sample of a gauge.
type series struct {
	labels map[string]string
	value  float64
}

// gather collects the sampler's metrics by name, as a scrape would.
func gather(c prometheus.Collector) (map[string][]series, error) {
	reg := prometheus.NewRegistry()
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("register the sampler: %w", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		return nil, fmt.Errorf("gather metrics: %w", err)
	}
	out := map[string][]series{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			out[mf.GetName()] = append(out[mf.GetName()], series{labels: labels, value: m.GetGauge().GetValue()})
		}
	}
	return out, nil
}

// find returns the value of the series of a container on a card.
func find(ss []series, a admitted, uuid string) (float64, bool) {
	for _, s := range ss {
		l := s.labels
		if l["namespace"] == a.Pod.Namespace && l["pod"] == a.Pod.Name && l["container"] == a.Container && l["gpu_uuid"] == uuid {
			return s.value, true
		}
	}
	return 0, false
}

// checkMetrics checks the plugin's usage metrics while every container holds its memory: each
// container's use is under its name, between what it holds and its limit, and its limit is
// what it asked.
func (r *checkRun) checkMetrics(sampler *usage.Sampler, adm []admitted, procs []*process) {
	ms, err := gather(sampler)
	if err != nil {
		r.res.add(modePrefix(adm)+"usage metrics", "gathered", err.Error(), false)
		return
	}
	held := map[string]int64{}
	for _, p := range procs {
		held[p.name], _ = p.snapshot().bytes(keyWithinBytes)
	}
	for _, a := range adm {
		used, ok := find(ms[metricUsed], a, r.card.UUID)
		observed := "no series"
		if ok {
			observed = mib(int64(used))
		}
		r.res.add(fmt.Sprintf("%s: %s{pod=%q,container=%q}", name(a), metricUsed, a.Pod.Name, a.Container),
			fmt.Sprintf("between %s (held) and %s (limit)", mib(held[name(a)]), mib(a.LimitBytes)), observed,
			ok && held[name(a)] > 0 && int64(used) >= held[name(a)] && int64(used) <= a.LimitBytes)
		limit, ok := find(ms[metricLimit], a, r.card.UUID)
		observed = "no series"
		if ok {
			observed = strconv.FormatFloat(limit, 'f', 0, 64)
		}
		r.res.add(fmt.Sprintf("%s: %s", name(a), metricLimit), strconv.FormatInt(a.LimitBytes, 10), observed, ok && int64(limit) == a.LimitBytes)
	}
	var names []string
	for _, s := range ms[metricUsed] {
		names = append(names, s.labels["pod"]+"/"+s.labels["container"])
	}
	sort.Strings(names)
	var want []string
	for _, a := range adm {
		want = append(want, name(a))
	}
	r.res.add(modePrefix(adm)+metricUsed+" names only the check's containers", strings.Join(want, ", "), strings.Join(names, ", "),
		strings.Join(names, ",") == strings.Join(want, ","))
}

// checkLimits checks what the container's workload saw: the limit as the card's size, an
// allocation within it, one past it refused, and NVML inside reporting the limit.
func (r *checkRun) checkLimits(a admitted, p *process) {
	rep, n, limitMiB := p.snapshot(), name(a), a.LimitBytes>>20
	why := func(key string) string {
		if v, ok := rep[key]; ok {
			return v
		}
		return "missing: " + failure(p)
	}
	total, ok := rep.bytes(keyTotal)
	r.res.add(n+": total memory CUDA reports (cudaMemGetInfo)", mib(a.LimitBytes)+" (the limit)", orWhy(ok, mib(total), why(keyTotal)), ok && total>>20 == limitMiB)
	if free, ok := rep.bytes(keyFree); ok {
		r.notes = append(r.notes, fmt.Sprintf("%s: %s free of %s right after CUDA started (the context counts against the limit)", n, mib(free), mib(total)))
	}
	within, _ := rep.bytes(keyWithinBytes)
	r.res.add(fmt.Sprintf("%s: allocate 60%% of the limit (%s)", n, mib(within)), "succeeds", why(keyWithin)+detail(rep, keyWithinError), rep[keyWithin] == resultOK)
	past, _ := rep.bytes(keyPastBytes)
	r.res.add(fmt.Sprintf("%s: allocate 150%% of the limit (%s) while the other container holds its memory", n, mib(past)),
		"CUDA out of memory (torch.OutOfMemoryError / cudaErrorMemoryAllocation)", why(keyPast)+detail(rep, keyPastError), rep[keyPast] == resultOOM)
	nvmlTotal, err := strconv.ParseInt(rep[keyNVMLTotalMiB], 10, 64)
	observed := why(keyNVMLTotalMiB)
	if _, ok := rep[keyNVMLError]; ok {
		observed = "error: " + rep[keyNVMLError]
	} else if err == nil {
		observed = fmt.Sprintf("%d MiB", nvmlTotal)
	}
	r.res.add(n+": total memory NVML reports inside (nvidia-smi)", fmt.Sprintf("%d MiB", limitMiB), observed, err == nil && nvmlTotal == limitMiB)
}

// name is a container's name in the report: pod/container.
func name(a admitted) string { return a.Pod.Name + "/" + a.Container }

// detail is " (<value of key>)" when the workload printed key.
func detail(rep workloadReport, key string) string {
	if v := rep[key]; v != "" {
		return " (" + v + ")"
	}
	return ""
}

// orWhy is v when ok, else why.
func orWhy(ok bool, v, why string) string {
	if ok {
		return v
	}
	return why
}

// failure says why a workload stopped: its fatal line, else the last line of its stderr.
func failure(p *process) string {
	if f := p.snapshot()[keyFatal]; f != "" {
		return f
	}
	if s := strings.TrimSpace(p.stderr.String()); s != "" {
		return "stderr: " + lastLine(s)
	}
	return "no output"
}
