package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gpushare/gpushare/test/e2e/framework"
)

// installFence applies framework.FenceManifests to the run's cluster and returns the flag
// that makes an extender act as its service account, so that its writes go through them.
func (b *bench) installFence(ctx context.Context) (string, error) {
	files := framework.FenceManifests()
	for i, f := range files {
		files[i] = filepath.Join(b.opts.Root, f)
	}
	if err := b.c.Apply(ctx, files...); err != nil {
		return "", err
	}
	user, groups := framework.ServiceAccountUser("kube-system", "gpushare-extender")
	kc, err := b.c.KubeconfigAs(user, groups, nil)
	if err != nil {
		return "", err
	}
	b.fenceKubeconfig = kc
	return "--kubeconfig=" + kc, nil
}

// waitFence waits until the fence policy is in force (framework.WaitFenceInForce; the
// Lease, its param, exists once a replica leads).
func (b *bench) waitFence(ctx context.Context) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", b.fenceKubeconfig)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", b.fenceKubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("client as the extender: %w", err)
	}
	if err := framework.WaitFenceInForce(ctx, client, "default", time.Minute); err != nil {
		return err //nolint:wrapcheck // says what it waited for
	}
	logf("fence: in force; the extender acts as its service account")
	return nil
}
