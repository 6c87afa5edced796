package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/client-go/tools/clientcmd"
)

// ServiceAccountUser is the user name of service account namespace/name, and its groups.
func ServiceAccountUser(namespace, name string) (string, []string) {
	return "system:serviceaccount:" + namespace + ":" + name,
		[]string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}
}

// KubeconfigAs writes, next to c.Kubeconfig, a copy of it that impersonates user (with groups
// and the extra claims of a projected token, e.g. authentication.kubernetes.io/node-name), and
// returns its path: a program run with it is held to the RBAC and the admission policies of
// that account, as the DaemonSet's or the Deployment's pods would be.
func (c *Cluster) KubeconfigAs(user string, groups []string, extra map[string][]string) (string, error) {
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		return "", fmt.Errorf("kubeconfig as %s: %w", user, err)
	}
	for _, a := range cfg.AuthInfos {
		a.Impersonate, a.ImpersonateGroups, a.ImpersonateUserExtra = user, groups, extra
	}
	path := filepath.Join(filepath.Dir(c.Kubeconfig), "kubeconfig-as-"+strings.NewReplacer(":", "-", "/", "-").Replace(user))
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", fmt.Errorf("kubeconfig as %s: %w", user, err)
	}
	return path, nil
}

// Apply applies YAML files or folders with the cluster's kubectl, as an operator would.
func (c *Cluster) Apply(ctx context.Context, paths ...string) error {
	for _, p := range paths {
		cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "kubectl"), "apply", "-f", p)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.Kubeconfig)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("kubectl apply -f %s: %w\n%s", p, err, out)
		}
	}
	return nil
}

// StartSharePluginAs is StartSharePlugin with the plugin acting as the DaemonSet's service
// account (kube-system/gpushare-share-plugin, with its pod-bound token's node-name claim), so
// that config/share-plugin/rbac.yaml and config/admission/ hold it as they would a real
// install; that RBAC must be applied first.
func (c *Cluster) StartSharePluginAs(bin, node string, extra ...string) error {
	user, groups := ServiceAccountUser("kube-system", "gpushare-share-plugin")
	kc, err := c.KubeconfigAs(user, groups, map[string][]string{"authentication.kubernetes.io/node-name": {node}})
	if err != nil {
		return err
	}
	return c.StartSharePlugin(bin, node, append(extra, "--kubeconfig="+kc)...)
}
