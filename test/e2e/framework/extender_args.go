package framework

import "strconv"

// extenderArgs are the flags cmd/extender needs to run against this cluster.
func extenderArgs(kubeconfig string, port int) []string {
	return []string{"--kubeconfig=" + kubeconfig, "--port=" + strconv.Itoa(port)}
}
