package framework

import (
	"path/filepath"
	"strconv"
)

// controllers are the kube-controller-manager controllers the tests and the demo need:
// workloads (StatefulSet, Deployment) create their pods, the garbage collector deletes them,
// the resource quota controller fills in a ResourceQuota's status (quota admission needs it).
// The node lifecycle controller stays off: it would taint the CNI-less real-kubelet node
// NoExecute and evict its pods.
const controllers = "serviceaccount,statefulset,replicaset,deployment,garbagecollector,resourcequota"

// StartControllerManager starts kube-controller-manager with the workload controllers.
func (c *Cluster) StartControllerManager() error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	_, err = c.start("kube-controller-manager", filepath.Join(c.Bin, "kube-controller-manager"), []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--controllers=" + controllers,
		"--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--v=1",
	})
	return err
}
