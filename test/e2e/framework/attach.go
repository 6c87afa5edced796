package framework

import (
	"context"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Attach returns the detached cluster recorded in dir (its kubeconfig and PID list), to stop it.
func Attach(dir string, logf func(string, ...any)) (*Cluster, error) {
	c, err := New(Options{Dir: dir, Detach: true, Logf: logf})
	if err != nil {
		return nil, err
	}
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if _, err := os.Stat(c.Kubeconfig); err == nil {
		cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
		if err != nil {
			return nil, err
		}
		cfg.Timeout = 10 * time.Second
		c.RestConfig = cfg
		if c.Client, err = kubernetes.NewForConfig(cfg); err != nil {
			return nil, err
		}
	}
	procs, err := attachedProcs(c.Dir)
	if err != nil && !os.IsNotExist(err) {
		return nil, err
	}
	c.procs = procs
	return c, nil
}

// DownDir stops the detached cluster in dir: first a real node, if one was started (its pods,
// kubelet, containers, containerd, mounts; see RealNode.Stop), then every other process by PID.
func DownDir(ctx context.Context, dir string, logf func(string, ...any)) error {
	c, err := Attach(dir, logf)
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "ctrd")); err == nil {
		logf("stopping the real node (pods, kubelet, containers, containerd)")
		n := &RealNode{c: c, ctrdDir: filepath.Join(c.Dir, "ctrd"), kubeletDir: filepath.Join(c.Dir, "kubelet")}
		n.socket = filepath.Join(n.ctrdDir, "containerd.sock")
		n.Stop(ctx)
	}
	return Down(c.Dir, 10*time.Second, logf)
}
