package framework

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/pkg/draconvert"
)

// draWebhookFile is the DRA conversion webhook's manifest (its configuration and the
// extender's RBAC for it).
const draWebhookFile = "config/dra/webhook.yaml"

// DRAManifests are DRA mode's cluster-wide objects, relative to the repository's root, that
// InstallDRA applies as shipped: the DeviceClass and the driver's RBAC. The DaemonSet is not
// among them: the tests run share-plugin on the host (RealNode.StartDRASharePlugin).
func DRAManifests() []string {
	return []string{"config/dra/deviceclass.yaml", "config/dra/rbac.yaml"}
}

// InstallDRA applies DRAManifests and the shipped webhook manifest, its webhook pointed at
// webhookURL (the extender's https://host:port, whose /mutate/dra serves it) instead of the
// in-cluster Service, with the cluster's CA as caBundle, and waits until kube-apiserver calls
// the webhook: a dry-run pod asking gpu-mem comes back converted.
func (c *Cluster) InstallDRA(ctx context.Context, webhookURL string) error {
	paths := make([]string, 0, 3)
	for _, m := range DRAManifests() {
		paths = append(paths, filepath.Join(c.Root, m))
	}
	hook, err := c.writeDRAWebhook(webhookURL)
	if err != nil {
		return err
	}
	if err := c.Apply(ctx, append(paths, hook)...); err != nil {
		return err
	}
	return c.waitDRAWebhook(ctx, time.Minute)
}

// writeDRAWebhook writes the shipped webhook manifest, rewritten for this cluster, into the
// cluster's folder and returns its path. Only clientConfig changes: a URL for the Service
// (with the Service's path) and the CA that signed the extender's serving certificate.
func (c *Cluster) writeDRAWebhook(webhookURL string) (string, error) {
	raw, err := os.ReadFile(filepath.Join(c.Root, draWebhookFile))
	if err != nil {
		return "", fmt.Errorf("DRA webhook manifest: %w", err)
	}
	ca, err := os.ReadFile(c.PKI.CAFile)
	if err != nil {
		return "", fmt.Errorf("extender CA: %w", err)
	}
	docs := strings.Split(string(raw), "\n---")
	found := false
	for i, doc := range docs {
		var cfg admissionregistrationv1.MutatingWebhookConfiguration
		if err := yaml.Unmarshal([]byte(doc), &cfg); err != nil {
			return "", fmt.Errorf("%s: %w", draWebhookFile, err)
		}
		if cfg.Kind != "MutatingWebhookConfiguration" {
			continue
		}
		for j := range cfg.Webhooks {
			cc := &cfg.Webhooks[j].ClientConfig
			if cc.Service == nil || cc.Service.Path == nil {
				return "", fmt.Errorf("%s: webhook %s has no service path", draWebhookFile, cfg.Webhooks[j].Name)
			}
			u := strings.TrimSuffix(webhookURL, "/") + *cc.Service.Path
			cc.URL, cc.Service, cc.CABundle = &u, nil, ca
		}
		out, err := yaml.Marshal(&cfg)
		if err != nil {
			return "", err
		}
		docs[i], found = "\n"+string(out), true
	}
	if !found {
		return "", fmt.Errorf("%s: no MutatingWebhookConfiguration", draWebhookFile)
	}
	path := filepath.Join(c.Dir, "dra-webhook.yaml")
	return path, os.WriteFile(path, []byte(strings.Join(docs, "\n---")), 0o644) //nolint:gosec // G703: the cluster's own folder
}

// waitDRAWebhook waits until a server-side dry run of a pod asking gpu-mem in the default
// namespace comes back converted (draconvert.AnnotationConverted): kube-apiserver has loaded
// the webhook configuration and reaches the webhook.
func (c *Cluster) waitDRAWebhook(ctx context.Context, timeout time.Duration) error {
	probe := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dra-webhook-probe", Namespace: "default"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "main", Image: LocalImage, Resources: v1.ResourceRequirements{
			Limits: v1.ResourceList{contract.DefaultResourceName: *resource.NewQuantity(1, resource.DecimalSI)},
		}}}},
	}
	var last string
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := WaitFor(ctx, 250*time.Millisecond, "the DRA webhook in force", func() (bool, error) {
		got, err := c.Client.CoreV1().Pods("default").Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		last = fmt.Sprintf("annotations %v, claims %d", got.Annotations, len(got.Spec.ResourceClaims))
		_, converted := got.Annotations[draconvert.AnnotationConverted]
		return converted, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last dry run: %s)", err, last)
	}
	return nil
}
