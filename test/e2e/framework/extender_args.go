package framework

import (
	"strconv"

	"github.com/gpushare/gpushare/internal/testpki"
)

// extenderArgs are the flags cmd/extender needs to run against this cluster: HTTPS with
// pki's serving certificate, client certificates of pki's CA required, and the cluster's key
// for preemption holds (the same for every replica).
func extenderArgs(kubeconfig string, port int, pki *testpki.PKI, holdKeyFile string) []string {
	return []string{"--kubeconfig=" + kubeconfig, "--address=127.0.0.1:" + strconv.Itoa(port), "--v=2",
		"--tls-cert-file=" + pki.ServerCert, "--tls-private-key-file=" + pki.ServerKey, "--client-ca-file=" + pki.CAFile,
		"--hold-key-file=" + holdKeyFile}
}

// sharePluginArgs are the flags cmd/share-plugin needs for node on a mocked NVML.
func sharePluginArgs(kubeconfig, node string) []string {
	return []string{"--kubeconfig=" + kubeconfig, "--node-name=" + node}
}
