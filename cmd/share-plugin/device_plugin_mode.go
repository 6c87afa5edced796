package main

import (
	"context"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/deviceplugin"
	"github.com/gpushare/gpushare/pkg/deviceplugin/nvml"
	"github.com/gpushare/gpushare/pkg/dra"
)

// runDevicePlugin serves the device plugin, unless the DRA driver runs on the node.
func runDevicePlugin(ctx context.Context, o *options, nv nvml.Interface, client kubernetes.Interface) error {
	if err := dra.CheckNoDRADriver(ctx, o.dra.registryDir, o.dra.driverName); err != nil {
		return err
	}
	pods := deviceplugin.NewInformerPodSource(client, o.nodeName)
	opts := append(o.pluginOptions(), deviceplugin.WithPodSource(pods))
	if o.podResourcesSocket != "" {
		pr, err := deviceplugin.NewPodResourcesClient(o.podResourcesSocket)
		if err != nil {
			return err
		}
		defer func() { _ = pr.Close() }()
		opts = append(opts, deviceplugin.WithPodResources(pr))
	}
	images, err := o.imageChecker(ctx)
	if err != nil {
		return err
	}
	if images != nil {
		defer func() { _ = images.Close() }()
		opts = append(opts, deviceplugin.WithImageChecker(images))
	}
	p, err := deviceplugin.New(nv, client, append(opts, deviceplugin.WithLogger(klog.FromContext(ctx)))...)
	if err != nil {
		return err
	}
	mode, _ := p.MemoryLimit()
	if err := startUsage(ctx, o, nv, pods, nil, client, mode); err != nil {
		return err
	}
	return p.Run(ctx)
}
