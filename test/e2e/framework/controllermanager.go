package framework

import (
	"path/filepath"
	"strconv"
)

// controllers are the kube-controller-manager controllers the tests and the demo need:
// workloads (StatefulSet, Deployment) create their pods, the garbage collector deletes them,
// the resource quota controller fills in a ResourceQuota's status (quota admission needs it).
// The DaemonSet controller and the root CA publisher (kube-root-ca.crt, which every pod's
// service-account volume mounts) let the shipped manifests run on the real kubelet. The node
// lifecycle controller stays off: it would taint the CNI-less real-kubelet node NoExecute and
// evict its pods. The disruption controller fills in PodDisruptionBudgets' status, which the
// Eviction API reads (GPU preemption evicts through it). The resource claim controller makes a
// pod's ResourceClaims from its ResourceClaimTemplates (DRA) and releases them when it is done.
const controllers = "serviceaccount,statefulset,replicaset,deployment,daemonset,garbagecollector,resourcequota,root-ca-cert-publisher,disruption,resourceclaim-controller"

// StartControllerManager starts kube-controller-manager with the workload controllers; extra
// flags come last (for example its client's --kube-api-qps and --kube-api-burst).
func (c *Cluster) StartControllerManager(extra ...string) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	_, err = c.start("kube-controller-manager", filepath.Join(c.Bin, "kube-controller-manager"), append([]string{
		"--kubeconfig=" + c.Kubeconfig,
		"--controllers=" + controllers,
		"--leader-elect=false",
		// kube-apiserver's self-signed serving certificate, its CA included
		"--root-ca-file=" + filepath.Join(c.Dir, "certs", "apiserver.crt"),
		"--bind-address=127.0.0.1", "--secure-port=" + strconv.Itoa(port),
		"--v=1",
	}, extra...))
	return err
}
