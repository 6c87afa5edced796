// Command gpucheck proves gpushare's GPU memory limits on a real NVIDIA GPU, without
// Kubernetes: it runs the share-plugin on the real NVML with a fake API server and kubelet,
// admits two pods placed on card 0 (GetPreferredAllocation and Allocate, as kubelet calls them),
// starts each container's workload as a container runtime would (a mount namespace with
// Allocate's mounts, exactly its env) with HAMi-core preloaded, and checks that each is held to
// its own limit, that NVML inside reports the limit, and that the plugin's usage metrics name
// the right containers. It measures what users budget for (budget.go): each card's total,
// driver reserve, usable and idle free memory, the CUDA context's cost with and without
// HAMi-core, and the largest allocation under limits of 1 GiB, 4 GiB and the whole card. On
// several GPUs it also checks the cards' topology as the share-plugin reads it against
// nvidia-smi topo -m (-topology-only: that alone). It prints Markdown tables and exits 0 only
// when every check passed, 77 when the machine cannot run it (no GPU, not root). Run it through `make gpu-check` (hack/gpu-check.sh), which builds it and HAMi-core's
// libvgpu.so.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	gonvml "github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
)

func main() {
	if arg, ok := os.LookupEnv(envNSExec); ok {
		os.Exit(nsExecMain(arg))
	}
	opts := &options{}
	klog.InitFlags(flag.CommandLine)
	addFlags(flag.CommandLine, opts)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, opts, os.Stdout)
	stop()
	klog.FlushAndExit(klog.ExitFlushTimeout, code)
}

// addFlags registers the options.
func addFlags(fs *flag.FlagSet, o *options) {
	fs.StringVar(&o.library, "library", "", "HAMi-core's libvgpu.so (required; hack/gpu-check.sh builds it)")
	fs.StringVar(&o.hamiCoreCommit, "hami-core-commit", "", "HAMi-core commit the library was built from, for the report")
	fs.StringVar(&o.workload, "workload", workloadAuto, "what allocates GPU memory: auto (PyTorch if it sees a GPU, else nvcc), torch or cuda")
	fs.StringVar(&o.passEnv, "pass-env", "PATH,HOME,LD_LIBRARY_PATH", "host variables added to Allocate's env where set (a container's image gives its own)")
	fs.Int64Var(&o.unitsA, "units-a", 4, "GiB pod A asks on card 0")
	fs.Int64Var(&o.unitsB, "units-b", 2, "GiB pod B asks on card 0")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "the whole check's time limit")
	fs.BoolVar(&o.keep, "keep", false, "keep the run's temporary folder")
	fs.BoolVar(&o.probeOnly, "probe-only", false, "only check that this machine can run the check (exit 0, or 77 with the reason)")
	fs.BoolVar(&o.topologyOnly, "topology-only", false, "only check the cards' topology as the share-plugin reads it (exit 77 on one card: nothing to check)")
}

// validate checks the options and makes the library's path absolute and free of links (it is
// mounted at that path).
func (o *options) validate() error {
	if o.library == "" {
		return errors.New("-library is required")
	}
	lib, err := filepath.Abs(o.library)
	if err == nil {
		lib, err = filepath.EvalSymlinks(lib)
	}
	if err != nil {
		return fmt.Errorf("-library: %w", err)
	}
	o.library = lib
	if o.unitsA <= 0 || o.unitsB <= 0 {
		return fmt.Errorf("-units-a %d and -units-b %d must be positive", o.unitsA, o.unitsB)
	}
	return nil
}

// run checks the machine, then the limits; it returns the exit status.
func run(ctx context.Context, opts *options, w io.Writer) int {
	logger := klog.Background()
	ctx = klog.NewContext(ctx, logger)
	lib := gonvml.New()
	nv := nvml.New(lib)
	if code, ok := preflight(ctx, realHost(nv.Init), w); !ok {
		return code
	}
	defer func() { _ = nv.Shutdown() }()
	if opts.probeOnly {
		_, _ = fmt.Fprintln(w, "gpu-check: this machine can run the check (root, NVIDIA GPU, NVML, mount namespaces)")
		return 0
	}
	smi := smiTopologyRunner(realHost(nv.Init))
	if opts.topologyOnly {
		return runTopologyOnly(ctx, nv, smi, w)
	}
	if err := opts.validate(); err != nil {
		logger.Error(err, "Invalid flags")
		return 2
	}
	return runGPUCheck(ctx, opts, nv, driverVersions(lib), smi, w)
}

// driverVersions reads the driver's version and the CUDA version it supports.
func driverVersions(lib gonvml.Interface) versions {
	v := versions{Driver: "unknown", CUDA: "unknown"}
	if d, ret := lib.SystemGetDriverVersion(); ret == gonvml.SUCCESS {
		v.Driver = d
	}
	if c, ret := lib.SystemGetCudaDriverVersion(); ret == gonvml.SUCCESS {
		v.CUDA = fmt.Sprintf("%d.%d", c/1000, c%1000/10)
	}
	return v
}

// nsExecMain runs the namespace helper and returns its exit status (it does not return when
// it starts the workload).
func nsExecMain(arg string) int {
	if err := runNSExec(arg); err != nil {
		klog.Background().Error(err, "gpucheck namespace helper failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 125)
	}
	return 0
}
