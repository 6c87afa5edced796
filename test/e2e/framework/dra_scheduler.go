package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// schedulerAloneConfig is a KubeSchedulerConfiguration without extenders: kube-scheduler
// with its defaults, as a managed control plane runs it (schedulerConfigFrom adds the
// kubeconfig and turns leader election off).
const schedulerAloneConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
`

// RestartSchedulerAlone stops the cluster's kube-scheduler and starts it again without any
// extender (a managed control plane's scheduler); RestartSchedulerShipped undoes it.
func (c *Cluster) RestartSchedulerAlone() error {
	path := filepath.Join(c.Dir, "scheduler-alone.yaml")
	if err := os.WriteFile(path, []byte(schedulerAloneConfig), 0o644); err != nil {
		return fmt.Errorf("scheduler config without extenders: %w", err)
	}
	return c.restartScheduler(path, "")
}

// RestartSchedulerShipped stops the cluster's kube-scheduler and starts it again with the
// shipped configuration (config/scheduler-config.yaml) pointed at the extender on
// extenderHost (host:port).
func (c *Cluster) RestartSchedulerShipped(extenderHost string) error {
	return c.restartScheduler("", extenderHost)
}

// restartScheduler stops the kube-scheduler process and starts it with the configuration file
// config ("" for the shipped one), logging to the same file.
func (c *Cluster) restartScheduler(config, extenderHost string) error {
	if p := c.Proc("kube-scheduler"); p != nil {
		p.Stop(10 * time.Second)
	}
	c.SchedulerConfig = config
	_, err := c.StartSchedulerAs("kube-scheduler", extenderHost, false)
	return err
}
