package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
	"github.com/gpushare/gpushare/test/e2e/cmd/internal/benchrun"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// With --dra the runs are DRA mode's (docs/dra.md): each node publishes its 8 cards in a
// ResourceSlice instead of gpu-mem, each pod is created in the claim form DRA mode's webhook
// gives it, kube-controller-manager's resource claim controller makes the pods' claims, and
// kube-scheduler's allocator chooses the card and binds; the extender's runs add the extender
// with --dra-mode behind config/dra/scheduler-config.yaml, filtering and scoring only.

// The shipped DRA files, relative to the repository's root.
const (
	draDeviceClassFile           = "config/dra/deviceclass.yaml"
	draSchedulerConfigFile       = "config/dra/scheduler-config.yaml"
	draExtenderModeFlag          = "--dra-mode"
	draCardsPerNode              = 8
	draCardGiB             int64 = 16
)

// draSettle is how long a run waits after the last ResourceSlice before the first pod: nothing
// tells when kube-scheduler's informers hold every slice, and a slice it has not seen yet makes
// its node's cards look absent.
const draSettle = 3 * time.Second

// startDRA starts kube-controller-manager (with kube-scheduler's client limits, when set: its
// resource claim controller creates one claim per pod) and applies the shipped DeviceClass.
func (b *bench) startDRA(ctx context.Context) error {
	var kcm []string
	if b.o.schedulerQPS > 0 {
		kcm = append(kcm, "--kube-api-qps="+strconv.FormatFloat(b.o.schedulerQPS, 'f', -1, 64))
	}
	if b.o.schedulerBurst > 0 {
		kcm = append(kcm, "--kube-api-burst="+strconv.Itoa(b.o.schedulerBurst))
	}
	if err := b.c.StartControllerManager(kcm...); err != nil {
		return err
	}
	return b.c.Apply(ctx, filepath.Join(b.c.Root, draDeviceClassFile))
}

// draNode is node name of DRA mode: framework.GPUNode's node without the device plugin's
// annotation, gpu-mem and gpu-count, whose plugin does not run there.
func draNode(name string) (*v1.Node, v1.ResourceList, error) {
	names := contract.DefaultNames()
	node, alloc, err := framework.GPUNode(name, draCardsPerNode, draCardGiB)
	if err != nil {
		return nil, nil, err
	}
	node.Annotations = nil
	delete(alloc, names.Resource)
	delete(alloc, names.Count)
	return node, alloc, nil
}

// draCards are node's cards as the driver publishes them: 8 of 16 GiB, by index.
func draCards(node string, unitBytes int64) []framework.DRACard {
	cards := make([]framework.DRACard, draCardsPerNode)
	for i := range cards {
		cards[i] = framework.DRACard{Index: i, UUID: fmt.Sprintf("GPU-%s-%d", node, i), Model: "Tesla T4", CapacityBytes: draCardGiB * unitBytes}
	}
	return cards
}

// addDRANodes creates the nodes, 16 at a time, each followed by its ResourceSlice; with the
// extender it waits until its cache holds them all, then lets kube-scheduler catch up.
func (b *bench) addDRANodes(ctx context.Context, names []string) error {
	contractNames := contract.DefaultNames()
	unit := contractNames.UnitBytes()
	err := benchrun.Parallel(len(names), 16, func(i int) error {
		node, alloc, err := draNode(names[i])
		if err != nil {
			return err
		}
		if err := b.c.AddReadyNode(ctx, node, alloc); err != nil {
			return err
		}
		return b.c.PublishDRASlice(ctx, framework.DRASlice(draconvert.DefaultDriver, names[i], draCards(names[i], unit), unit))
	})
	if err != nil {
		return err
	}
	for i, ext := range b.exts {
		if err := benchrun.WaitCached(ctx, ext, b.names[i]+" cache to hold every node's slice", len(names)); err != nil {
			return err
		}
	}
	select {
	case <-time.After(draSettle):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// checkDRA returns the number of cards over capacity by the allocated claims
// (framework.CheckDRACapacity), an error when any is, when a result is unmetered or unknown, or
// when the claims consumed other than the bound pods asked.
func (b *bench) checkDRA(ctx context.Context) (int, error) {
	check, err := b.c.CheckDRACapacity(ctx, draconvert.DefaultDriver)
	if err != nil {
		return 0, err
	}
	pods, err := b.c.Client.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list pods: %w", err)
	}
	names := contract.DefaultNames()
	asked, err := boundAskedBytes(pods.Items, names.UnitBytes())
	if err != nil {
		return len(check.Overcommitted), err
	}
	logf("%s run: DRA capacity: %s; bound pods asked %d bytes, claims consumed %d", b.mode.name, check, asked, check.ConsumedBytes)
	if !check.OK() {
		return len(check.Overcommitted), fmt.Errorf("DRA capacity invariant failed: %s", check)
	}
	if asked != check.ConsumedBytes {
		return 0, fmt.Errorf("the claims consumed %d bytes, the bound pods asked %d", check.ConsumedBytes, asked)
	}
	return 0, nil
}

// prepareDRAPods, with --dra, converts the pod of each size once and makes the claim templates
// exist, before the burst; after kube-scheduler started, whose name the pods carry.
func (b *bench) prepareDRAPods(ctx context.Context) error {
	if !b.o.dra {
		return nil
	}
	shapes, templates, err := newDRAShapes(func(units int64) *v1.Pod { return b.gpuPod("shape", units) })
	if err != nil {
		return err
	}
	if err := ensureDRATemplates(ctx, b.c.Client, templates); err != nil {
		return err
	}
	b.draShapes = shapes
	return nil
}
