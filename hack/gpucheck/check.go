package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/usage"
)

// options are the run's settings (flags).
type options struct {
	library, hamiCoreCommit string
	workload, passEnv       string
	unitsA, unitsB          int64
	timeout                 time.Duration
	keep, probeOnly         bool
	topologyOnly            bool
}

// versions are the driver's versions, for the report.
type versions struct {
	Driver, CUDA string
}

// checkRun is one run on a GPU machine: what it found, for the report.
type checkRun struct {
	opts *options
	nv   nvml.Interface
	dir  string
	wl   workload
	card nvml.Device
	res  results
	// notes are printed under the table.
	notes []string
	// runtime is the workload's runtime and CUDA runtime version, as it reported them.
	runtime string
	// onRunning, when set, is called once the given workloads are waiting to be measured (tests
	// with a mock NVML make their memory appear there).
	onRunning func(procs []*process)
	// smi runs nvidia-smi topo -m; nil without nvidia-smi (the topology is then not compared).
	smi func(ctx context.Context) (string, error)
}

// runGPUCheck runs the check on this machine's GPU (NVML initialized) and writes the report;
// it returns the exit status.
func runGPUCheck(ctx context.Context, opts *options, nv nvml.Interface, ver versions, smi func(context.Context) (string, error), w io.Writer) int {
	logger := klog.FromContext(ctx)
	ctx, cancel := context.WithTimeout(ctx, opts.timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "gpucheck-")
	if err != nil {
		logger.Error(err, "Temporary folder")
		return 1
	}
	if opts.keep {
		logger.Info("Keeping the run's folder", "dir", dir)
	} else {
		defer func() { _ = os.RemoveAll(dir) }()
	}
	r := &checkRun{opts: opts, nv: nv, dir: dir, smi: smi}
	if r.card, err = nv.Device(checkCard); err != nil {
		logger.Error(err, "Reading the card")
		return 1
	}
	logger.Info("Preparing the workload", "workload", opts.workload)
	if r.wl, err = prepareWorkload(ctx, realToolbox(), opts.workload, dir); err != nil {
		if errors.Is(err, errNoWorkload) {
			_, _ = fmt.Fprintf(w, "SKIP gpu-check: %v — this is not a pass\n", err)
			return exitSkip
		}
		logger.Error(err, "Preparing the workload")
		return 1
	}
	r.measureCards()
	r.measureContext(ctx)
	r.measureLimits(ctx)
	r.runPods(ctx)
	r.runDRAPods(ctx)
	r.checkTopology(ctx, r.smi)
	r.addMachineNotes(ver)
	return r.render(w)
}

// measureContext runs a process that only starts CUDA, on the host without HAMi-core, and
// reads its memory from NVML: the context overhead every container pays inside its limit.
func (r *checkRun) measureContext(ctx context.Context) {
	argv := r.wl.command(modeContext)
	p, err := startProcess(ctx, "context", exec.CommandContext(ctx, argv[0], argv[1:]...)) //nolint:gosec // G204: our workload
	const name, want = "CUDA context of a process that only started CUDA (NVML, host, no HAMi-core)", "measured, > 0"
	if err != nil {
		r.res.add(name, want, err.Error(), false)
		return
	}
	defer func() { _ = p.finish() }()
	if !p.waitFor(ctx, keyReady) {
		r.res.add(name, want, "workload failed: "+failure(p), false)
		return
	}
	r.running([]*process{p})
	rep := p.snapshot()
	r.runtime = rep[keyRuntime] + ", CUDA runtime " + rep[keyCUDARuntime]
	used, err := r.processMemory(p.pid())
	if err != nil {
		r.res.add(name, want, err.Error(), false)
		return
	}
	r.res.add(name, want, mib(used), used > 0)
	r.res.measured("CUDA context per process, without HAMi-core (NVML)", mib(used))
	// the share-plugin's policing lets each process use this much beyond its container's limit
	// before it has escaped (--limit-escape-allowance): a context must fit in it
	r.res.add("CUDA context fits in the default --limit-escape-allowance", "<= "+mib(usage.DefaultContextAllowanceBytes),
		mib(used), used > 0 && used <= usage.DefaultContextAllowanceBytes)
	r.notes = append(r.notes, fmt.Sprintf("CUDA context overhead: %s per process (NVML, a process that only called %s; counted against each container's limit)",
		mib(used), map[string]string{workloadTorch: "torch.cuda.mem_get_info", workloadCUDA: "cudaMemGetInfo"}[r.wl.kind]))
}

// processMemory is the GPU memory NVML reports for pid on the card.
func (r *checkRun) processMemory(pid int) (int64, error) {
	u, err := r.nv.Usage(checkCard)
	if err != nil {
		return 0, fmt.Errorf("NVML usage: %w", err)
	}
	for _, pr := range u.Processes {
		if int(pr.PID) == pid && pr.UsedKnown {
			return int64(pr.UsedBytes), nil //nolint:gosec // G115: GPU memory fits
		}
	}
	return 0, fmt.Errorf("pid %d not among NVML's %d processes of card %d", pid, len(u.Processes), checkCard)
}

// runPods admits the two pods through the share-plugin and runs their containers side by side.
func (r *checkRun) runPods(ctx context.Context) {
	node, adm, ok := r.allocate(ctx)
	if !ok {
		return
	}
	mode, _ := node.plugin.MemoryLimit()
	owners := newPIDOwners("/proc")
	sampler, err := usage.New(usage.Config{NVML: r.nv, Pods: node.podLister(), Owners: owners, Names: node.names,
		MemoryLimit: mode, MemoryLimitConfigured: mode})
	if err != nil {
		r.res.add("usage sampler", "starts", err.Error(), false)
		return
	}
	r.runTogether(ctx, adm, sampler, owners)
}

// runTogether starts the admitted containers side by side, checks that they hold memory on
// the card together and the sampler's metrics of them, and then each one's limits.
func (r *checkRun) runTogether(ctx context.Context, adm []admitted, sampler *usage.Sampler, owners *pidOwners) {
	procs := r.startContainers(ctx, adm, owners)
	defer func() {
		for _, p := range procs {
			_ = p.finish()
		}
	}()
	for _, p := range procs {
		p.waitFor(ctx, keyHolding)
	}
	r.running(procs)
	snap, err := sampler.Sample(ctx)
	r.checkTogether(adm, snap, err, procs)
	r.checkMetrics(sampler, adm, procs)
	for _, p := range procs {
		p.send(workloadGoSignal)
	}
	for _, p := range procs {
		p.waitFor(ctx, keyReady)
	}
	for i, p := range procs {
		if err := p.finish(); err != nil {
			klog.FromContext(ctx).Info("Workload exited with an error", "container", p.name, "err", err)
		}
		r.checkLimits(adm[i], p)
	}
	procs = nil
}

// running calls onRunning, if set.
func (r *checkRun) running(procs []*process) {
	if r.onRunning != nil {
		r.onRunning(procs)
	}
}

// allocate builds the plugin with HAMi-core and admits the pods; ok is false when that failed
// (the rows say why).
func (r *checkRun) allocate(ctx context.Context) (*fakeNode, []admitted, bool) {
	cfg := deviceplugin.MemoryLimitConfig{Mode: deviceplugin.MemoryLimitHAMiCore, Library: r.opts.library,
		StateDir: filepath.Join(r.dir, "state"), CollectAfter: deviceplugin.DefaultCollectAfter}
	node, err := newFakeNode(ctx, r.nv, r.opts.asks(), deviceplugin.WithMemoryLimit(cfg))
	if err != nil {
		r.res.add("share-plugin on the real NVML", "starts", err.Error(), false)
		return nil, nil, false
	}
	mode, reason := node.plugin.MemoryLimit()
	r.res.add("share-plugin memory limit mode", deviceplugin.MemoryLimitHAMiCore, strings.TrimSpace(mode+" "+reason), mode == deviceplugin.MemoryLimitHAMiCore)
	if mode != deviceplugin.MemoryLimitHAMiCore {
		return nil, nil, false
	}
	adm, err := node.admitAll(ctx)
	if err != nil {
		r.res.add("GetPreferredAllocation + Allocate for both pods", "succeed", err.Error(), false)
		return nil, nil, false
	}
	for _, a := range adm {
		r.checkAllocate(a)
	}
	return node, adm, true
}

// startContainers starts each admitted container's workload as that container.
func (r *checkRun) startContainers(ctx context.Context, adm []admitted, owners *pidOwners) []*process {
	var procs []*process
	for _, a := range adm {
		p, err := r.startContainer(ctx, a, modeLimits, owners)
		if err != nil {
			r.res.add(name(a)+": start as a container", "starts", err.Error(), false)
			continue
		}
		procs = append(procs, p)
	}
	return procs
}

// startContainer starts the workload in mode as the admitted container (a mount namespace with
// Allocate's mounts, exactly its env) and records its owner in owners, when not nil.
func (r *checkRun) startContainer(ctx context.Context, a admitted, mode string, owners *pidOwners) (*process, error) {
	spec := &containerSpec{Stage: filepath.Join(r.dir, "c-"+a.Pod.Name), Mounts: containerMounts(a.Response.GetMounts()),
		Argv: r.wl.command(mode), Env: containerEnv(a.Response.GetEnvs(), splitList(r.opts.passEnv), osLookupEnv)}
	cmd, err := containerCommand(ctx, spec)
	if err != nil {
		return nil, err
	}
	p, err := startProcess(ctx, name(a), cmd)
	if err != nil {
		return nil, err
	}
	if owners != nil {
		owners.add(p.pid(), usage.Owner{PodUID: string(a.Pod.UID), ContainerID: a.ContainerID})
	}
	return p, nil
}

// addMachineNotes adds the GPU, driver, workload and library to the notes.
func (r *checkRun) addMachineNotes(ver versions) {
	r.notes = append([]string{
		fmt.Sprintf("GPU: %s, %s (NVML index %d, %s)", r.card.Model, mib(int64(r.card.MemoryBytes)), checkCard, r.card.UUID), //nolint:gosec // G115: GPU memory fits
		fmt.Sprintf("driver: %s; CUDA (driver): %s", ver.Driver, ver.CUDA),
		fmt.Sprintf("workload: %s (%s)", r.wl.kind, r.runtime),
		fmt.Sprintf("HAMi-core: commit %s; libvgpu.so %s sha256 %s", orUnknown(r.opts.hamiCoreCommit), r.opts.library, fileHash(r.opts.library)),
	}, r.notes...)
}

// render writes the table, the notes and the summary; it returns the exit status.
func (r *checkRun) render(w io.Writer) int {
	_, _ = fmt.Fprintln(w)
	if err := r.res.writeTable(w); err != nil {
		return 1
	}
	_, _ = fmt.Fprintln(w)
	if len(r.res.measures) > 0 {
		if err := r.res.writeMeasures(w); err != nil {
			return 1
		}
		_, _ = fmt.Fprintln(w)
	}
	for _, n := range r.notes {
		_, _ = fmt.Fprintln(w, n)
	}
	_, _ = fmt.Fprintln(w, r.res.summary())
	if _, failed := r.res.counts(); failed > 0 || len(r.res.checks) == 0 {
		return 1
	}
	return 0
}

// fileHash is the hex SHA-256 of a file, or why not.
func fileHash(path string) string {
	data, err := os.ReadFile(path) //nolint:gosec // G304: the library the operator named
	if err != nil {
		return "unreadable: " + err.Error()
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// orUnknown is s, or "unknown" when empty.
func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// asks are the two pods of the check.
func (o *options) asks() []podAsk {
	return []podAsk{{Pod: "pod-a", Container: "main", Units: o.unitsA}, {Pod: "pod-b", Container: "main", Units: o.unitsB}}
}
