package main

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin"
)

// What users budget for, measured on the machine's GPU (docs/isolation.md keeps the table): each
// card's total, what the driver reserves of it, what is left (the share-plugin's units) and
// what is free at idle; what a CUDA context costs a process, with and without HAMi-core; and
// the largest allocation a container gets under a limit of 1 GiB, 4 GiB and the whole card.

// limitAsks are the asks the largest allocation is measured under, in units (GiB); 0 is the
// whole card: every unit the share-plugin advertises of it.
func limitAsks() []int64 { return []int64{1, 4, 0} }

// allocSlack is how far below what CUDA reports free inside a whole-card container its largest
// allocation may fall and still count as the card giving what it advertises: the search's step
// (workload.py and alloc.cu bisect in 16 MiB steps) and the allocator's rounding.
const allocSlack = 64 << 20

// measureCards records, for every card, its total, the driver's reserve, what is left for
// containers (in the share-plugin's units) and what NVML reports free now: before any
// workload of the check, so at idle unless something else uses the card.
func (r *checkRun) measureCards() {
	names := contract.DefaultNames()
	n, err := r.nv.DeviceCount()
	if err != nil {
		r.res.add("card memory", "read from NVML", err.Error(), false)
		return
	}
	for i := range n {
		d, err := r.nv.Device(i)
		if err != nil {
			r.res.add(fmt.Sprintf("GPU %d memory", i), "read from NVML", err.Error(), false)
			continue
		}
		u, err := r.nv.Usage(i)
		free := mib(int64(u.FreeBytes)) //nolint:gosec // G115: GPU memory fits
		if err != nil {
			free = "unknown: " + err.Error()
		}
		reserved := "unknown (the driver has no nvmlDeviceGetMemoryInfo_v2: the share-plugin counts the total)"
		if d.ReservedKnown {
			reserved = mib(int64(d.ReservedBytes)) //nolint:gosec // G115: GPU memory fits
		}
		usable := d.MemoryBytes - d.ReservedBytes
		card := fmt.Sprintf("GPU %d (%s)", i, d.Model)
		r.res.measured(card+": total (NVML)", mib(int64(d.MemoryBytes))) //nolint:gosec // G115: GPU memory fits
		r.res.measured(card+": reserved by the driver (NVML)", reserved)
		r.res.measured(card+": usable (total - reserved)", fmt.Sprintf("%s = %d units of %s", mib(int64(usable)), //nolint:gosec // G115: GPU memory fits
			names.UnitsOf(usable), names.Unit.String()))
		r.res.measured(card+": free at idle (NVML)", free)
	}
}

// cardUnits is card checkCard's usable memory in units: what a pod asking the whole card asks.
func (r *checkRun) cardUnits() int64 {
	names := contract.DefaultNames()
	return names.UnitsOf(r.card.MemoryBytes - r.card.ReservedBytes)
}

// measureLimits measures, under each of limitAsks, the largest allocation a container gets (a
// pod of that ask alone on card checkCard, admitted by the share-plugin with HAMi-core); under
// the smallest, also what the CUDA context costs with HAMi-core.
func (r *checkRun) measureLimits(ctx context.Context) {
	for i, units := range limitAsks() {
		whole := units == 0
		if whole {
			units = r.cardUnits()
		}
		r.measureLimit(ctx, units, whole, i == 0)
	}
}

// measureLimit runs one maxalloc container asking units (the whole card when whole); withContext
// also records its CUDA context.
func (r *checkRun) measureLimit(ctx context.Context, units int64, whole, withContext bool) {
	label := fmt.Sprintf("%d GiB", units)
	if whole {
		label = fmt.Sprintf("the whole card (%d GiB)", units)
	}
	name := "largest allocation under a limit of " + label
	a, ok := r.admitAlone(ctx, podAsk{Pod: fmt.Sprintf("limit-%d", units), Container: "main", Units: units}, whole)
	if !ok {
		return
	}
	p, err := r.startContainer(ctx, a, modeMaxAlloc, nil)
	if err != nil {
		r.res.add(name, "measured", err.Error(), false)
		return
	}
	defer func() { _ = p.finish() }()
	if !p.waitFor(ctx, keyHolding) {
		r.res.add(name, "measured", "workload failed: "+failure(p), false)
		return
	}
	r.running([]*process{p})
	if withContext {
		r.measureHAMiContext(p, a.LimitBytes)
	}
	p.send(workloadGoSignal)
	p.waitFor(ctx, keyReady)
	r.checkMaxAlloc(name, p.snapshot(), a.LimitBytes, whole)
}

// admitAlone admits a pod of ask alone on card checkCard (a share-plugin of its own, with
// HAMi-core), so that any ask up to the whole card fits; with whole it also checks that the
// plugin advertises the card's usable memory.
func (r *checkRun) admitAlone(ctx context.Context, ask podAsk, whole bool) (admitted, bool) {
	cfg := deviceplugin.MemoryLimitConfig{Mode: deviceplugin.MemoryLimitHAMiCore, Library: r.opts.library,
		StateDir: filepath.Join(r.dir, "state-"+ask.Pod), CollectAfter: deviceplugin.DefaultCollectAfter}
	node, err := newFakeNode(ctx, r.nv, []podAsk{ask}, deviceplugin.WithMemoryLimit(cfg))
	if err != nil {
		r.res.add(ask.Pod+": share-plugin on the real NVML", "starts", err.Error(), false)
		return admitted{}, false
	}
	if whole {
		got := node.plugin.GPUs()[checkCard].Units
		r.res.add(fmt.Sprintf("share-plugin advertises GPU %d's usable memory (total - driver's reserve)", checkCard),
			fmt.Sprintf("%d units", ask.Units), fmt.Sprintf("%d units", got), got == ask.Units)
	}
	adm, err := node.admitAll(ctx)
	if err != nil {
		r.res.add(ask.Pod+": GetPreferredAllocation + Allocate", "succeed", err.Error(), false)
		return admitted{}, false
	}
	return adm[0], true
}

// measureHAMiContext records what the CUDA context of a process under HAMi-core costs: on the
// card (NVML, from the host) and as HAMi-core counts it inside (the limit less what CUDA
// reports free right after it started).
func (r *checkRun) measureHAMiContext(p *process, limit int64) {
	if used, err := r.processMemory(p.pid()); err == nil {
		r.res.measured("CUDA context per process, with HAMi-core (NVML)", mib(used))
	} else {
		r.res.measured("CUDA context per process, with HAMi-core (NVML)", "unknown: "+err.Error())
	}
	if free, ok := p.snapshot().bytes(keyFree); ok {
		r.res.measured("CUDA context as HAMi-core counts it (limit - free inside the container)", mib(limit-free))
	}
}

// checkMaxAlloc records the largest allocation a container made under limit and checks it: at
// most the limit; under the whole card, at least what CUDA reported free inside less
// allocSlack, or the card does not give what the share-plugin advertises.
func (r *checkRun) checkMaxAlloc(name string, rep workloadReport, limit int64, whole bool) {
	got, ok := rep.bytes(keyMaxAlloc)
	observed := mib(got)
	if !ok {
		observed = "missing" + detail(rep, keyMaxAllocError)
		if rep[keyFatal] != "" {
			observed += " (" + rep[keyFatal] + ")"
		}
	}
	r.res.measured(name, observed)
	want, pass := fmt.Sprintf("> 0 and <= %s (the limit)", mib(limit)), ok && got > 0 && got <= limit
	if free, known := rep.bytes(keyFree); whole && known {
		want = fmt.Sprintf(">= %s (free inside less %s) and <= %s: the card gives what it advertises", mib(free-allocSlack), mib(allocSlack), mib(limit))
		pass = ok && got >= free-allocSlack && got <= limit
	}
	r.res.add(name, want, observed, pass)
}
