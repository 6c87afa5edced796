package main

import (
	"context"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/sim"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// draSettle is how long the replay waits after the last ResourceSlice before the first pod, so
// that kube-scheduler's informers hold every node's slice: nothing tells when they do, and a
// slice it has not seen yet would make its node's cards look absent.
const draSettle = 3 * time.Second

// addDRANodes creates the trace's nodes as nodes of the DRA mode (draNode), one at a time in
// the trace's order (kube-scheduler's node order, as in the device-plugin replay), each
// followed by its ResourceSlice as share-plugin --mode=dra publishes it (draCards), then lets
// kube-scheduler catch up.
func (p *production) addDRANodes(ctx context.Context, nodes []sim.Node) error {
	t0 := time.Now()
	unit := p.names.UnitBytes()
	for i := range nodes {
		n := &nodes[i]
		node, allocatable, err := draNode(n)
		if err != nil {
			return err
		}
		if err := p.cluster.AddReadyNode(ctx, node, allocatable); err != nil {
			return err
		}
		if n.GPUs == 0 {
			continue
		}
		if err := p.cluster.PublishDRASlice(ctx, framework.DRASlice(draDriver, n.Name, draCards(n, unit), unit)); err != nil {
			return err
		}
	}
	logf("%d nodes and their ResourceSlices created in %.1f s", len(nodes), time.Since(t0).Seconds())
	select {
	case <-time.After(draSettle):
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// draNode is trace node n as a node of the DRA mode: its CPU and memory (sim.NodeObject's),
// 1,000 pods, and neither gpu-mem, gpu-count nor the GPU annotation of the device-plugin mode,
// whose plugin does not run there; its GPUs are in its ResourceSlice.
func draNode(n *sim.Node) (*v1.Node, v1.ResourceList, error) {
	names := contract.DefaultNames()
	node, err := sim.NodeObject(n, &names)
	if err != nil {
		return nil, nil, err
	}
	allocatable := node.Status.Allocatable
	allocatable[v1.ResourcePods] = *resource.NewQuantity(1000, resource.DecimalSI)
	node.Status = v1.NodeStatus{}
	node.Annotations = nil
	node.Labels = map[string]string{"kubernetes.io/hostname": node.Name}
	return node, allocatable, nil
}

// draCards are n's cards as the driver would read them: sim.NodeObject's UUIDs and model, and
// sim.MilliPerGPU units of memory each, as the device-plugin replay sizes them.
func draCards(n *sim.Node, unitBytes int64) []framework.DRACard {
	cards := make([]framework.DRACard, n.GPUs)
	for i := range cards {
		cards[i] = framework.DRACard{Index: i, UUID: n.Name + "-gpu" + strconv.Itoa(i), Model: n.Model, CapacityBytes: sim.MilliPerGPU * unitBytes}
	}
	return cards
}
