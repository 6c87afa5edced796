package framework

import (
	"path/filepath"
)

// KwokSelector is the node annotation kwok manages; only our fake nodes carry it.
const KwokSelector = "kwok.x-k8s.io/node"

// StartKwok starts kwok, which keeps the fake nodes Ready (heartbeats) and moves pods bound to
// them to Running, with the stock stages hack/e2e-bins.sh saved next to the binary.
func (c *Cluster) StartKwok() error {
	_, err := c.start("kwok", filepath.Join(c.Bin, "kwok"), []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=" + KwokSelector + "=fake",
		"--node-ip=127.0.0.1", "--cidr=10.254.0.0/16",
		"--config=" + filepath.Join(c.Bin, "kwok-stages.yaml"),
	})
	return err
}
