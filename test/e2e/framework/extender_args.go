package framework

import "strconv"

// extenderArgs are the flags cmd/extender needs to run against this cluster.
func extenderArgs(kubeconfig string, port int) []string {
	return []string{"--kubeconfig=" + kubeconfig, "--address=127.0.0.1:" + strconv.Itoa(port), "--v=2"}
}

// sharePluginArgs are the flags cmd/share-plugin needs for node on a mocked NVML.
func sharePluginArgs(kubeconfig, node string) []string {
	return []string{"--kubeconfig=" + kubeconfig, "--node-name=" + node}
}
