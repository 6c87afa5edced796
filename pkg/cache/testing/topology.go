package testing

import "github.com/gpushare/gpushare/pkg/contract"

// Links gives card i the link row rows[i] of the node's link matrix (contract.GPU.Links, such
// as "X NV4 SYS SYS") with the current contract.TopologyVersion, as a share-plugin that reports
// topology publishes them. Call it after GPUs; rows beyond the cards are ignored.
func (n *NodeWrapper) Links(rows ...string) *NodeWrapper {
	for i := range n.gpus {
		if i < len(rows) {
			n.gpus[i].Links, n.gpus[i].TopologyVersion = rows[i], contract.TopologyVersion
		}
	}
	return n
}
