package main

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/deviceplugin/usage"
)

// usageNeeded says whether startUsage has anything to do: serve metrics, or police the limits
// of a node that enforces them (memoryLimit, the plugin's effective mode).
func usageNeeded(o *options, memoryLimit string) bool {
	return o.metricsAddress != "" || memoryLimit == contract.MemoryLimitHAMiCore
}

// startUsage starts reading GPU usage every --usage-period, serving it on --metrics-address and,
// where the node enforces limits (memoryLimit, the plugin's effective mode), policing the
// containers that escape them. shares, in DRA mode, says what each container holds (nil: the
// pods' gpu-mem requests and placements). It starts nothing when there is neither to do.
func startUsage(ctx context.Context, o *options, nv nvml.Interface, pods usage.PodLister, shares usage.ShareSource, client kubernetes.Interface, memoryLimit string) error {
	enforcing := memoryLimit == contract.MemoryLimitHAMiCore
	if !usageNeeded(o, memoryLimit) {
		return nil
	}
	cfg := usage.Config{
		NVML: nv, Pods: pods, Owners: usage.ProcReader{Root: o.hostProc}, Names: o.names, Shares: shares,
		MemoryLimit: memoryLimit, MemoryLimitConfigured: o.memoryLimit.Mode,
		Warn: func(ctx context.Context, pod *v1.Pod, reason, message string) error {
			return deviceplugin.WarnPod(ctx, client, o.nodeName, pod, reason, message)
		},
	}
	if enforcing {
		cfg.Escapes = escapePolicy(ctx, o)
	}
	sampler, err := usage.New(cfg)
	if err != nil {
		return err
	}
	if o.metricsAddress != "" {
		l, err := usage.Listen(o.metricsAddress)
		if err != nil {
			return err
		}
		go func() {
			if err := usage.Serve(ctx, l, sampler); err != nil {
				klog.FromContext(ctx).Error(err, "Metrics server stopped")
			}
		}()
	}
	go sampler.Run(ctx, o.usagePeriod)
	return nil
}

// escapePolicy polices escapes through the host's /proc (--host-proc), and says at start what
// it cannot do: recognize the library by its identity, or kill (the plugin then needs hostPID).
func escapePolicy(ctx context.Context, o *options) *usage.EscapePolicy {
	logger := klog.FromContext(ctx)
	allowance := uint64(o.limitEscapeAllowance.Value()) //nolint:gosec // G115: validate keeps it >= 0
	p, err := usage.NewProcPolicy(o.hostProc, o.memoryLimit.Library, o.limitEscapeAction, allowance)
	if err != nil {
		logger.Error(err, "HAMi-core library identity unknown: GPU processes are checked for it by path only")
	}
	if view, err := usage.NewProcView(o.hostProc, o.memoryLimit.PreloadHostPath(), o.memoryLimit.Library); err != nil {
		logger.Error(err, "Cannot check that containers see the plugin's /etc/ld.so.preload: only their GPU processes are checked for HAMi-core")
	} else {
		p.View = view
	}
	if o.limitEscapeAction == usage.EscapeActionKill {
		if err := (usage.ProcKiller{Root: o.hostProc}).Check(); err != nil {
			logger.Error(err, "CANNOT KILL containers that escape their GPU memory limit: run share-plugin with hostPID: true (and CAP_KILL); escapes are still reported")
		}
	}
	logger.Info("Policing GPU memory limits from the host", "action", o.limitEscapeAction, "allowancePerProcess", o.limitEscapeAllowance.String(),
		"library", o.memoryLimit.Library, "hostProc", o.hostProc, "period", o.usagePeriod)
	return p
}
