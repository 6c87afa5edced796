package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// upConfig is what `up` needs.
type upConfig struct {
	dir, bin, extender, policy string
	port                       int
	plugin, pause              string
}

// realNodeTaint keeps the sample workload off the real node; the demo's real-node pod
// tolerates it.
const realNodeTaint = "gpushare.io/real-node=true:NoSchedule"

func up(ctx context.Context, args []string) error {
	var cfg upConfig
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	fs.StringVar(&cfg.dir, "dir", ".demo", "cluster folder (data, logs, kubeconfig, PIDs)")
	fs.StringVar(&cfg.bin, "bin", "", "folder of hack/e2e-bins.sh's binaries")
	fs.StringVar(&cfg.extender, "extender", "", "the gpushare extender binary")
	fs.StringVar(&cfg.policy, "policy", "binpack", "extender placement policy")
	fs.IntVar(&cfg.port, "extender-port", 0, "extender port on 127.0.0.1 (0: a free one)")
	fs.StringVar(&cfg.plugin, "share-plugin", "", "share-plugin built with -tags fakenvml: also start a real kubelet node (root)")
	fs.StringVar(&cfg.pause, "pause", "", "the sandbox pause binary (test/e2e/cmd/pause), with --share-plugin")
	_ = fs.Parse(args)
	if cfg.bin == "" || cfg.extender == "" {
		return fmt.Errorf("--bin and --extender are required")
	}
	root, err := framework.RepoRoot()
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(cfg.dir, "pids")); err == nil {
		return fmt.Errorf("%s already holds a running cluster: run `make demo-down` first", cfg.dir)
	}
	c, err := framework.New(framework.Options{Root: root, Bin: cfg.bin, Dir: cfg.dir, Detach: true, Logf: logf})
	if err != nil {
		return err
	}
	if err := start(ctx, c, cfg); err != nil {
		logf("start failed, stopping what was started")
		c.Stop()
		return err
	}
	return nil
}

func start(ctx context.Context, c *framework.Cluster, cfg upConfig) error {
	t0 := time.Now()
	if err := c.StartControlPlane(ctx); err != nil {
		return err
	}
	if err := c.StartControllerManager(); err != nil {
		return err
	}
	if err := c.StartKwok(); err != nil {
		return err
	}
	ext, err := c.StartExtender(ctx, cfg.extender, cfg.port, "--policy="+cfg.policy)
	if err != nil {
		return err
	}
	logf("extender ready on %s", ext.URL())
	if err := c.StartScheduler(ext.Host()); err != nil {
		return err
	}
	nodes := map[string][]contract.GPU{
		"gpu-node-1": framework.Cards("gpu-node-1", "Tesla T4", 16, 2),
		"gpu-node-2": framework.Cards("gpu-node-2", "Tesla V100-SXM2-32GB", 32, 1),
	}
	for _, name := range []string{"gpu-node-1", "gpu-node-2"} {
		if err := c.AddGPUNode(ctx, name, nodes[name]); err != nil {
			return err
		}
		logf("fake GPU node %s (kwok): %d x %d GiB %s", name, len(nodes[name]), nodes[name][0].Units, nodes[name][0].Model)
	}
	if cfg.plugin != "" {
		if err := startRealNode(ctx, c, cfg); err != nil {
			return err
		}
	}
	// EXTENDER_CURL: the options curl needs for the extender's mutual TLS.
	curl := fmt.Sprintf("--cacert %s --cert %s --key %s", c.PKI.CAFile, c.PKI.ClientCert, c.PKI.ClientKey)
	env := fmt.Sprintf("KUBECONFIG=%s\nEXTENDER=%s\nEXTENDER_CURL=%q\nSCHEDULER_NAME=%s\n", c.Kubeconfig, ext.URL(), curl, c.SchedulerName)
	if err := os.WriteFile(filepath.Join(c.Dir, "env"), []byte(env), 0o644); err != nil {
		return err
	}
	logf("cluster up in %.1f s", time.Since(t0).Seconds())
	return nil
}

// startRealNode adds node "localhost": containerd, a real kubelet and share-plugin serving two
// mocked 16 GiB GPUs.
func startRealNode(ctx context.Context, c *framework.Cluster, cfg upConfig) error {
	node, err := c.StartRealNode(ctx, cfg.pause, realNodeTaint)
	if err != nil {
		return err
	}
	// the plugin acts as its DaemonSet's service account, held by its RBAC and the admission
	// policies the demo applies (only it and the extender may write placements)
	if err := c.EnsureNamespace(ctx, "kube-system"); err != nil {
		return err
	}
	if err := c.Apply(ctx, filepath.Join(c.Root, "config", "share-plugin", "rbac.yaml")); err != nil {
		return err
	}
	if err := c.StartSharePluginAs(cfg.plugin, framework.RealNodeName, "--fake-gpus=dgxa100", "--fake-gpu-count=2",
		"--fake-gpu-memory=16Gi", "--pod-resources-socket="+node.PodResourcesSocket()); err != nil {
		return err
	}
	gpus, err := c.WaitNodeGPUs(ctx, framework.RealNodeName, 2*time.Minute)
	if err != nil {
		return err
	}
	logf("real node %s (kubelet + containerd + share-plugin on mocked NVML): %d x %d GiB %s",
		framework.RealNodeName, len(gpus), gpus[0].Units, gpus[0].Model)
	return nil
}
