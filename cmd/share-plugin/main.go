// Command share-plugin shares a node's GPUs by memory, in one of two modes (--mode): a kubelet
// device plugin that advertises GPU memory (aliyun.com/gpu-mem) and hands each container the
// GPU the extender chose for its pod (the default), or a DRA driver that publishes each GPU's
// memory as consumable capacity and holds each claim to what it consumed.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/version"
)

func main() {
	o := newOptions()
	klog.InitFlags(flag.CommandLine)
	o.addFlags(flag.CommandLine)
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, o)
	stop()
	if err != nil {
		klog.Background().Error(err, "share-plugin failed")
		klog.FlushAndExit(klog.ExitFlushTimeout, 1)
	}
}

func run(ctx context.Context, o *options) error {
	logger := klog.Background()
	ctx = klog.NewContext(ctx, logger)
	if err := o.validate(); err != nil {
		return fmt.Errorf("invalid flags: %w", err)
	}
	logger.Info("Starting share-plugin", "version", version.Version, "commit", version.Commit, "mode", o.mode, "node", o.nodeName, "resource", o.names.Resource,
		"unit", o.names.Unit.String(), "kubeletDir", o.kubeletDir, "podResources", o.podResourcesSocket, "memoryLimit", o.memoryLimit.Mode, "sysfsRoot", o.sysfsRoot,
		"reserveMemoryBytes", o.reserveMemory, "healthCheck", o.healthCheck, "ignoredXIDs", o.ignoredXIDs)
	nv, err := openNVML(&o.fake)
	if err != nil {
		return err
	}
	if err := nv.Init(); err != nil {
		return err
	}
	defer func() { _ = nv.Shutdown() }()
	cfg, err := clientcmd.BuildConfigFromFlags("", o.kubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.qps), o.burst
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("API client: %w", err)
	}
	if o.mode == modeDRA {
		return runDRA(ctx, o, nv, client)
	}
	return runDevicePlugin(ctx, o, nv, client)
}
