package deviceplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/gpushare/gpushare/pkg/contract"
)

// GPUs returns the node's cards as the inventory annotation publishes them: health, memory
// limit mode, NUMA node and links included.
func (p *Plugin) GPUs() []contract.GPU {
	mode, _ := p.backend.Mode()
	return p.inv.contractGPUs(mode)
}

// publishNode writes the GPU inventory annotation and the gpu-count capacity of the node.
func (p *Plugin) publishNode(ctx context.Context) error {
	gpus := p.GPUs()
	value, err := contract.EncodeGPUs(gpus)
	if err != nil {
		return err
	}
	nodes := p.client.CoreV1().Nodes()
	meta, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"annotations": map[string]string{p.cfg.names.NodeGPUsAnnotation: value}}})
	if err != nil {
		return fmt.Errorf("encode node annotation patch: %w", err)
	}
	if _, err := nodes.Patch(ctx, p.cfg.nodeName, types.MergePatchType, meta, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch node %s annotation %s: %w", p.cfg.nodeName, p.cfg.names.NodeGPUsAnnotation, err)
	}
	count := strconv.Itoa(len(gpus))
	res := map[string]string{string(p.cfg.names.Count): count}
	st, err := json.Marshal(map[string]any{"status": map[string]any{"capacity": res, "allocatable": res}})
	if err != nil {
		return fmt.Errorf("encode node status patch: %w", err)
	}
	if _, err := nodes.Patch(ctx, p.cfg.nodeName, types.MergePatchType, st, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("patch node %s status %s=%s: %w", p.cfg.nodeName, p.cfg.names.Count, count, err)
	}
	return nil
}
