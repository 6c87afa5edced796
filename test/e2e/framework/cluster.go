// Package framework runs a local Kubernetes control plane for gpushare's end-to-end tests and
// demo: etcd, kube-apiserver and kube-scheduler built by hack/e2e-bins.sh, the extender, and
// fake GPU nodes kept Ready by kwok. Everything listens on 127.0.0.1 only; every process is
// recorded by PID in the cluster's folder and stopped by PID.
package framework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/gpushare/gpushare/internal/testpki"
)

// Options configure a Cluster.
type Options struct {
	// Root is the repository root.
	Root string
	// Bin holds the binaries of hack/e2e-bins.sh.
	Bin string
	// Dir holds the cluster's data, certificates, logs, kubeconfig and PID list.
	Dir string
	// Detach lets the processes outlive this program (the demo); stop them with Down.
	Detach bool
	// SchedulerConfig is the KubeSchedulerConfiguration file kube-scheduler runs with; empty means
	// the shipped config/scheduler-config.yaml.
	SchedulerConfig string
	// SchedulerQPS and SchedulerBurst, when positive, set kube-scheduler's client rate limits
	// (clientConnection.qps and burst); otherwise kube-scheduler's defaults apply.
	SchedulerQPS   float64
	SchedulerBurst int
	// FeatureGates, when set, is passed as --feature-gates to kube-apiserver and kube-scheduler
	// (for example "GenericWorkload=true" for gang scheduling); empty keeps their defaults.
	FeatureGates string
	// RuntimeConfig, when set, is passed as --runtime-config to kube-apiserver (for example
	// "scheduling.k8s.io/v1beta1=true"); empty keeps its defaults.
	RuntimeConfig string
	// Logf prints progress lines.
	Logf func(format string, args ...any)
}

// Cluster is a running local control plane.
type Cluster struct {
	Options
	// Kubeconfig is the path of an admin kubeconfig for kubectl.
	Kubeconfig string
	// RestConfig and Client talk to the apiserver as system:masters.
	RestConfig *rest.Config
	Client     kubernetes.Interface
	// SchedulerName is the name pods must ask for to reach the extender.
	SchedulerName string
	// PluginMetricsURL is the /metrics URL of the share-plugin StartSharePlugin or
	// RealNode.StartDRASharePlugin started.
	PluginMetricsURL string
	// PKI holds the certificates of the extender's mutual TLS: the extender serves
	// PKI.ServerCert and trusts PKI.CAFile for clients; kube-scheduler and the tests present
	// PKI.ClientCert.
	PKI *testpki.PKI
	// HoldKeyFile is the key every extender replica of the cluster signs its preemption holds
	// with (--hold-key-file): one key, so that a new leader or a restarted extender keeps them.
	HoldKeyFile string

	token   string
	apiPort int
	etcdURL string

	mu    sync.Mutex
	procs []*Proc // in start order
}

// New prepares a cluster in o.Dir; nothing runs until StartControlPlane.
func New(o Options) (*Cluster, error) {
	if o.Logf == nil {
		o.Logf = func(string, ...any) {}
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(o.Dir)
	if err != nil {
		return nil, err
	}
	o.Dir = dir
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	pkiDir := filepath.Join(dir, "pki")
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return nil, err
	}
	pki, err := testpki.New(pkiDir, "extender-", "127.0.0.1", "localhost")
	if err != nil {
		return nil, fmt.Errorf("extender certificates: %w", err)
	}
	holdKey := filepath.Join(pkiDir, "hold.key")
	key := make([]byte, 32) // as hack/extender-certs.sh makes it
	_, _ = rand.Read(key)   // never fails (Go 1.24+)
	if err := os.WriteFile(holdKey, key, 0o600); err != nil {
		return nil, fmt.Errorf("extender hold key: %w", err)
	}
	return &Cluster{Options: o, token: hex.EncodeToString(tok), SchedulerName: "default-scheduler", PKI: pki, HoldKeyFile: holdKey}, nil
}

// start runs a binary of the cluster and remembers it for Stop.
func (c *Cluster) start(name, bin string, args []string, env ...string) (*Proc, error) {
	p, err := startProc(c.Dir, name, bin, args, env, !c.Detach)
	if p != nil {
		c.mu.Lock()
		c.procs = append(c.procs, p)
		c.mu.Unlock()
	}
	if err == nil {
		c.Logf("started %s (pid %d, log %s)", name, p.PID(), p.LogPath)
	}
	return p, err
}

// Proc returns the last started process of that name, or nil.
func (c *Cluster) Proc(name string) *Proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.procs) - 1; i >= 0; i-- {
		if c.procs[i].Name == name {
			return c.procs[i]
		}
	}
	return nil
}

// Stop stops every process this Cluster started, newest first (kube-apiserver before etcd,
// or the apiserver's shutdown hangs ~20 s).
func (c *Cluster) Stop() {
	if c.Detach {
		_ = DownDir(context.Background(), c.Dir, c.Logf)
		return
	}
	c.mu.Lock()
	procs := append([]*Proc(nil), c.procs...)
	c.mu.Unlock()
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].Stop(10 * time.Second)
	}
	_ = os.Remove(filepath.Join(c.Dir, pidsFile))
}

// FreePort returns a currently free TCP port on 127.0.0.1.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// WaitFor polls cond every interval until it returns true, an error, or ctx ends.
func WaitFor(ctx context.Context, interval time.Duration, what string, cond func() (bool, error)) error {
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", what, ctx.Err(), last) //nolint:errorlint // last may be nil; %w would print %!w(<nil>).
		case <-time.After(interval):
		}
	}
}

// NewClient returns a clientset for the apiserver with generous client-side rate limits.
func (c *Cluster) NewClient() (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(c.RestConfig)
}

// RestConfigWithLimits returns a copy of the cluster's client configuration with client-side
// limits of qps requests per second and bursts of burst; a negative qps means no limit.
func (c *Cluster) RestConfigWithLimits(qps float32, burst int) *rest.Config {
	rc := rest.CopyConfig(c.RestConfig)
	rc.QPS, rc.Burst = qps, burst
	return rc
}
