package framework

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/gpushare/gpushare/internal/testpki"
)

// fallbackSchedulerConfig is used only while the repository has no config/scheduler-config.yaml.
const fallbackSchedulerConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
extenders:
- urlPrefix: http://127.0.0.1:39999/gpushare-scheduler
  filterVerb: filter
  prioritizeVerb: prioritize
  bindVerb: bind
  preemptVerb: preempt
  weight: 10
  enableHTTPS: false
  nodeCacheCapable: true
  httpTimeout: 30s
  ignorable: false
  managedResources:
  - name: aliyun.com/gpu-mem
    ignoredByScheduler: false
`

// SchedulerConfigPath is the project's scheduler configuration the tests run with.
func SchedulerConfigPath(root string) string {
	return filepath.Join(root, "config", "scheduler-config.yaml")
}

// schedulerConfigFrom returns the KubeSchedulerConfiguration in path rewritten for this
// cluster: our kubeconfig, leader election on only when asked (with kube-scheduler's default
// timings), and every extender's urlPrefix pointed at extenderHost (host:port) with its path
// kept, over HTTPS with pki's client certificate (mutual TLS). It also returns the first
// profile's schedulerName.
func schedulerConfigFrom(path, kubeconfig, extenderHost string, pki *testpki.PKI, leaderElect bool, qps float64, burst int) ([]byte, string, error) {
	raw, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		raw, err = []byte(fallbackSchedulerConfig), nil
	}
	if err != nil {
		return nil, "", err
	}
	cfg, err := findSchedulerConfig(raw)
	if err != nil {
		return nil, "", err
	}
	conn := map[string]any{"kubeconfig": kubeconfig}
	if qps > 0 && burst > 0 {
		conn["qps"], conn["burst"] = qps, burst
	}
	cfg["clientConnection"] = conn
	cfg["leaderElection"] = map[string]any{"leaderElect": leaderElect}
	exts, _ := cfg["extenders"].([]any) // none: kube-scheduler alone
	for _, e := range exts {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, "", fmt.Errorf("scheduler config: extender is %T", e)
		}
		prefix, _ := m["urlPrefix"].(string)
		u, err := url.Parse(prefix)
		if err != nil {
			return nil, "", fmt.Errorf("extender urlPrefix %q: %w", prefix, err)
		}
		u.Scheme, u.Host = "https", extenderHost
		m["urlPrefix"] = u.String()
		m["enableHTTPS"] = true
		m["tlsConfig"] = map[string]any{"certFile": pki.ClientCert, "keyFile": pki.ClientKey, "caFile": pki.CAFile}
	}
	name := "default-scheduler"
	if profiles, _ := cfg["profiles"].([]any); len(profiles) > 0 {
		if p, ok := profiles[0].(map[string]any); ok {
			if n, ok := p["schedulerName"].(string); ok && n != "" {
				name = n
			}
		}
	}
	out, err := yaml.Marshal(cfg)
	return out, name, err
}

// PercentageOfNodesToScore is the percentageOfNodesToScore the KubeSchedulerConfiguration in
// path gives its first profile (the profile's own, else the global one); 0, kube-scheduler's
// adaptive default, when neither is set.
func PercentageOfNodesToScore(path string) (int32, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	cfg, err := findSchedulerConfig(raw)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	pct, _ := cfg["percentageOfNodesToScore"].(float64)
	if profiles, _ := cfg["profiles"].([]any); len(profiles) > 0 {
		if p, ok := profiles[0].(map[string]any); ok {
			if v, ok := p["percentageOfNodesToScore"].(float64); ok {
				pct = v
			}
		}
	}
	if pct < 0 || pct > 100 {
		return 0, fmt.Errorf("%s: percentageOfNodesToScore %v is not 0..100", path, pct)
	}
	return int32(pct), nil
}

// findSchedulerConfig returns the KubeSchedulerConfiguration document of a (multi-document) YAML.
func findSchedulerConfig(raw []byte) (map[string]any, error) {
	for _, doc := range strings.Split(string(raw), "\n---") {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			return nil, fmt.Errorf("parse scheduler config: %w", err)
		}
		if m["kind"] == "KubeSchedulerConfiguration" {
			return m, nil
		}
	}
	return nil, fmt.Errorf("no KubeSchedulerConfiguration document")
}

// StartScheduler starts kube-scheduler with the project's configuration pointed at the extender
// on extenderHost (host:port), without leader election.
func (c *Cluster) StartScheduler(extenderHost string) error {
	_, err := c.StartSchedulerAs("kube-scheduler", extenderHost, false)
	return err
}

// StartSchedulerAs starts one of several kube-scheduler replicas: name names its process, log
// and config; with leaderElect the replicas elect a leader on the Lease kube-system/kube-scheduler
// as in a highly available control plane.
func (c *Cluster) StartSchedulerAs(name, extenderHost string, leaderElect bool) (*Proc, error) {
	file := c.Options.SchedulerConfig
	if file == "" {
		file = SchedulerConfigPath(c.Root)
	}
	cfg, schedName, err := schedulerConfigFrom(file, c.Kubeconfig, extenderHost, c.PKI, leaderElect, c.SchedulerQPS, c.SchedulerBurst)
	if err != nil {
		return nil, err
	}
	path := filepath.Join(c.Dir, name+"-config.yaml")
	if err := os.WriteFile(path, cfg, 0o644); err != nil {
		return nil, err
	}
	c.SchedulerName = schedName
	args := []string{"--config=" + path, "--secure-port=0", "--v=2"}
	if c.FeatureGates != "" {
		args = append(args, "--feature-gates="+c.FeatureGates)
	}
	return c.start(name, filepath.Join(c.Bin, "kube-scheduler"), args)
}
