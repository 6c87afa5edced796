package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/deviceplugin/usage"
	"github.com/gpushare/gpushare/pkg/imagecheck"
)

// maxPolicedUsagePeriod is the longest --usage-period where limits are enforced: an escaped
// container is caught at the next reading, and its co-tenants run short of memory until then.
const maxPolicedUsagePeriod = 5 * time.Second

// options are the command line of share-plugin.
type options struct {
	// mode is modeDevicePlugin or modeDRA (--mode).
	mode               string
	names              contract.Names
	nodeName           string
	kubeconfig         string
	kubeletDir         string
	socketName         string
	podResourcesSocket string
	resyncPeriod       time.Duration
	resolveWait        time.Duration
	healthCheck        bool
	// ignoredXIDs leave a card healthy (--health-ignored-xids).
	ignoredXIDs []uint64
	// reserveMemory is held back of every card on top of the driver's reserve, in bytes.
	reserveMemory  int64
	qps            float64
	burst          int
	metricsAddress string
	usagePeriod    time.Duration
	hostProc       string
	sysfsRoot      string
	memoryLimit    deviceplugin.MemoryLimitConfig
	// limitEscapeAction and limitEscapeAllowance: what is done to a container that escapes its
	// limit, and what each of its processes may use beyond it (usage.EscapePolicy).
	limitEscapeAction    string
	limitEscapeAllowance resource.Quantity
	// imageCheck and containerd*: how containers' images are checked before they start
	// (imageCheckAuto, imageCheckContainerd or imageCheckNone; see image_check.go).
	imageCheck            string
	containerdSocket      string
	containerdNamespace   string
	containerdSnapshotter string
	hostRoot              string
	// dra are the flags of DRA mode (dra_mode.go); device-plugin mode reads the driver's
	// name and registry folder to refuse a node where the driver runs.
	dra  draOptions
	fake fakeOptions
}

func newOptions() *options {
	return &options{
		mode:               modeDevicePlugin,
		names:              contract.DefaultNames(),
		nodeName:           os.Getenv("NODE_NAME"),
		kubeletDir:         pluginapi.DevicePluginPath,
		socketName:         "gpushare.sock",
		podResourcesSocket: deviceplugin.DefaultPodResourcesSocket,
		resyncPeriod:       2 * time.Second,
		resolveWait:        3 * time.Second,
		healthCheck:        true,
		ignoredXIDs:        deviceplugin.DefaultIgnoredXIDs(),
		qps:                50,
		burst:              100,
		metricsAddress:     ":9446",
		usagePeriod:        5 * time.Second,
		hostProc:           "/proc",
		sysfsRoot:          "/sys",
		memoryLimit:        deviceplugin.DefaultMemoryLimitConfig(),

		limitEscapeAction:    usage.EscapeActionKill,
		limitEscapeAllowance: *resource.NewQuantity(usage.DefaultContextAllowanceBytes, resource.BinarySI),

		imageCheck:            imageCheckAuto,
		containerdSocket:      imagecheck.DefaultContainerdSocket,
		containerdNamespace:   imagecheck.DefaultNamespace,
		containerdSnapshotter: imagecheck.DefaultSnapshotter,
		hostRoot:              "/",
		dra:                   newDRAOptions(),
	}
}

// addFlags registers every flag; NODE_NAME is the env mirror of --node-name.
func (o *options) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.mode, "mode", o.mode, "how GPUs are shared on this node: device-plugin (aliyun.com/gpu-mem through a kubelet device plugin, placed by the extender) or dra (a DRA driver publishing each GPU's memory as consumable capacity; docs/dra.md)")
	o.names.AddFlags(fs)
	fs.StringVar(&o.nodeName, "node-name", o.nodeName, "node this plugin runs on (env NODE_NAME, from the downward API)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig, "kubeconfig file; empty means in-cluster")
	fs.StringVar(&o.kubeletDir, "kubelet-dir", o.kubeletDir, "kubelet device-plugin directory (holds kubelet.sock)")
	fs.StringVar(&o.socketName, "socket-name", o.socketName, "file name of the plugin socket in --kubelet-dir")
	fs.StringVar(&o.podResourcesSocket, "pod-resources-socket", o.podResourcesSocket, "kubelet PodResources socket; empty disables the cross-check of Allocate")
	fs.DurationVar(&o.resyncPeriod, "resync-period", o.resyncPeriod, "how often Allocate answers are cross-checked and pods marked assigned")
	fs.DurationVar(&o.resolveWait, "resolve-wait", o.resolveWait, "how long Allocate waits for the pod to appear in the informer")
	fs.BoolVar(&o.healthCheck, "health-check", o.healthCheck, "watch NVML XID events and mark failed GPUs unhealthy")
	fs.Var(xidList{&o.ignoredXIDs}, "health-ignored-xids", "comma-separated XIDs that leave a GPU healthy (the application's faults, as NVIDIA's device plugin ignores); empty: every critical XID takes the GPU")
	fs.Var(byteSize{&o.reserveMemory}, "reserve-memory", "GPU memory held back of every card on top of what the driver reserves (NVML), e.g. 512Mi: a card's units count its total less both")
	fs.Float64Var(&o.qps, "kube-api-qps", o.qps, "API client QPS")
	fs.IntVar(&o.burst, "kube-api-burst", o.burst, "API client burst")
	fs.StringVar(&o.metricsAddress, "metrics-address", o.metricsAddress, "address serving /metrics (GPU memory and utilization per card and per container); empty disables")
	fs.DurationVar(&o.usagePeriod, "usage-period", o.usagePeriod, "how often GPU usage is read from NVML, and containers that escaped their limit are caught (at most 5s with --memory-limit=hami-core)")
	fs.StringVar(&o.hostProc, "host-proc", o.hostProc, "the host's /proc, where GPU processes' cgroups are read (mount it, e.g. at /host/proc, when the plugin has its own PID namespace)")
	fs.StringVar(&o.sysfsRoot, "sysfs-root", o.sysfsRoot, "where sysfs is mounted: a card whose NUMA node NVML does not know gets <root>/bus/pci/devices/<bus ID>/numa_node")
	fs.StringVar(&o.memoryLimit.Mode, "memory-limit", o.memoryLimit.Mode, "how containers are held to the GPU memory they ask: hami-core (HAMi-core preloaded into every container, a limit per card) or none")
	fs.StringVar(&o.memoryLimit.Library, "hami-core-library", o.memoryLimit.Library, "absolute host path of HAMi-core's libvgpu.so, mounted read-only at the same path into containers (the plugin must see the host's file there)")
	fs.StringVar(&o.memoryLimit.InstallFrom, "hami-core-install-from", o.memoryLimit.InstallFrom, "a libvgpu.so (e.g. the image's) copied to --hami-core-library at start; empty installs nothing")
	fs.StringVar(&o.memoryLimit.StateDir, "hami-core-state-dir", o.memoryLimit.StateDir, "absolute host folder for the preload file and each container's HAMi-core counters (removed when the pod goes)")
	fs.DurationVar(&o.memoryLimit.CollectAfter, "hami-core-collect-after", o.memoryLimit.CollectAfter, "how long a gone pod's HAMi-core counter folder is kept after it was last written")
	fs.Var(byteSize{&o.memoryLimit.CounterSize}, "hami-core-counter-size", "size of the tmpfs mounted on each container's HAMi-core counter folder, which bounds what a container can write there on the node (needs a privileged plugin with the state folder mounted Bidirectional); at least 2Mi, or 0 for plain, unbounded host folders")
	fs.StringVar(&o.limitEscapeAction, "limit-escape-action", o.limitEscapeAction, "with --memory-limit=hami-core, what is done to a container that escapes its GPU memory limit (seen from the host: NVML's processes, their cgroups and maps): kill (SIGKILL its processes on the card; needs hostPID) or none (the event and metrics only)")
	fs.Func("limit-escape-allowance", "GPU memory each of a container's processes on a card may use beyond its limit there before it has escaped: the CUDA context, outside HAMi-core's count (default "+o.limitEscapeAllowance.String()+")", func(s string) error {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return fmt.Errorf("limit escape allowance %q: %w", s, err)
		}
		o.limitEscapeAllowance = q
		return nil
	})
	o.addImageCheckFlags(fs)
	o.dra.addFlags(fs)
	o.fake.addFlags(fs)
}

// validate reports the first problem.
func (o *options) validate() error {
	var errs []error
	switch o.mode {
	case modeDevicePlugin:
	case modeDRA:
		cfg := o.draConfig()
		if err := cfg.Validate(); err != nil {
			errs = append(errs, err)
		}
	default:
		errs = append(errs, fmt.Errorf("--mode must be %s or %s, not %q", modeDevicePlugin, modeDRA, o.mode))
	}
	if err := o.names.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.nodeName == "" {
		errs = append(errs, errors.New("--node-name (or env NODE_NAME) is required"))
	}
	policed := o.memoryLimit.Mode == contract.MemoryLimitHAMiCore
	if (o.metricsAddress != "" || policed) && o.usagePeriod <= 0 {
		errs = append(errs, errors.New("--usage-period must be > 0"))
	}
	if policed && o.usagePeriod > maxPolicedUsagePeriod {
		errs = append(errs, fmt.Errorf("--usage-period must be at most %v with --memory-limit=hami-core: escapes are caught once a period", maxPolicedUsagePeriod))
	}
	if err := usage.ValidateEscapeAction(o.limitEscapeAction); err != nil {
		errs = append(errs, fmt.Errorf("--limit-escape-action: %w", err))
	}
	if o.limitEscapeAllowance.Sign() < 0 {
		errs = append(errs, errors.New("--limit-escape-allowance must be >= 0"))
	}
	if err := deviceplugin.ValidateMemoryLimit(o.memoryLimit); err != nil {
		errs = append(errs, err)
	}
	if err := o.validateImageCheck(); err != nil {
		errs = append(errs, err)
	}
	if o.sysfsRoot == "" {
		errs = append(errs, errors.New("--sysfs-root must not be empty"))
	}
	if o.resyncPeriod <= 0 || o.resolveWait < 0 {
		errs = append(errs, fmt.Errorf("--resync-period must be > 0 and --resolve-wait >= 0"))
	}
	return errors.Join(errs...)
}

// pluginOptions converts the flags into deviceplugin options.
func (o *options) pluginOptions() []deviceplugin.Option {
	return []deviceplugin.Option{
		deviceplugin.WithNames(o.names), deviceplugin.WithNodeName(o.nodeName),
		deviceplugin.WithKubeletDir(o.kubeletDir), deviceplugin.WithSocketName(o.socketName),
		deviceplugin.WithResyncPeriod(o.resyncPeriod), deviceplugin.WithResolveWait(o.resolveWait),
		deviceplugin.WithHealthCheck(o.healthCheck), deviceplugin.WithMemoryLimit(o.memoryLimit),
		deviceplugin.WithSysfsRoot(o.sysfsRoot), deviceplugin.WithReserveMemory(o.reserveMemory),
		deviceplugin.WithIgnoredXIDs(o.ignoredXIDs),
	}
}
