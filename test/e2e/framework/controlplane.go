package framework

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// StartControlPlane starts etcd and kube-apiserver, waits for /readyz, writes the kubeconfig and
// creates the default ServiceAccount (normally kube-controller-manager's job; pods are refused
// without it).
func (c *Cluster) StartControlPlane(ctx context.Context) error {
	t0 := time.Now()
	etcdURL, err := c.startEtcd()
	if err != nil {
		return err
	}
	c.etcdURL = etcdURL
	if err := c.startAPIServer(); err != nil {
		return err
	}
	if err := c.waitAPIServer(ctx); err != nil {
		return err
	}
	if err := c.writeKubeconfig(); err != nil {
		return err
	}
	if err := c.createDefaultServiceAccount(ctx); err != nil {
		return err
	}
	c.Logf("control plane ready in %.1f s: KUBECONFIG=%s", time.Since(t0).Seconds(), c.Kubeconfig)
	return nil
}

func (c *Cluster) startEtcd() (string, error) {
	client, err := FreePort()
	if err != nil {
		return "", err
	}
	peer, err := FreePort()
	if err != nil {
		return "", err
	}
	clientURL := "http://127.0.0.1:" + strconv.Itoa(client)
	peerURL := "http://127.0.0.1:" + strconv.Itoa(peer)
	_, err = c.start("etcd", filepath.Join(c.Bin, "etcd"), []string{
		"--name=e2e", "--data-dir=" + filepath.Join(c.Dir, "etcd-data"),
		"--listen-client-urls=" + clientURL, "--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=e2e=" + peerURL, "--unsafe-no-fsync", "--log-level=warn",
	})
	return clientURL, err
}

// startAPIServer starts kube-apiserver on c.etcdURL: the first time on a free port with new key
// material, on a restart on the same port with the same keys (clients and tokens stay valid).
func (c *Cluster) startAPIServer() error {
	certs := filepath.Join(c.Dir, "certs")
	if err := os.MkdirAll(certs, 0o700); err != nil {
		return err
	}
	tokens := filepath.Join(certs, "tokens.csv")
	if c.apiPort == 0 {
		if err := writeServiceAccountKey(certs); err != nil {
			return err
		}
		if err := os.WriteFile(tokens, []byte(c.token+",admin,admin,system:masters\n"), 0o600); err != nil {
			return err
		}
		port, err := FreePort()
		if err != nil {
			return err
		}
		c.apiPort = port
	}
	args := []string{
		"--etcd-servers=" + c.etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--secure-port=" + strconv.Itoa(c.apiPort),
		// the endpoint reconciler refuses a loopback advertise address
		"--endpoint-reconciler-type=none",
		"--cert-dir=" + certs, "--token-auth-file=" + tokens, "--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + filepath.Join(certs, "sa.pub"),
		"--service-account-signing-key-file=" + filepath.Join(certs, "sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		// node "localhost" of the real-kubelet test is reached by name, so logs/exec work
		"--kubelet-preferred-address-types=Hostname,InternalIP",
		"--allow-privileged=true", "--enable-priority-and-fairness=false", "--v=1",
	}
	if c.FeatureGates != "" {
		args = append(args, "--feature-gates="+c.FeatureGates)
	}
	if c.RuntimeConfig != "" {
		args = append(args, "--runtime-config="+c.RuntimeConfig)
	}
	_, err := c.start("kube-apiserver", filepath.Join(c.Bin, "kube-apiserver"), args)
	return err
}

// RestartAPIServer kills kube-apiserver (SIGKILL), waits down, then starts it again on the
// same port and etcd and waits for /readyz: an API server crash as clients see it.
func (c *Cluster) RestartAPIServer(ctx context.Context, down time.Duration) error {
	p := c.Proc("kube-apiserver")
	if p == nil {
		return fmt.Errorf("no kube-apiserver to restart")
	}
	p.Kill()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	if err := c.startAPIServer(); err != nil {
		return err
	}
	return c.waitAPIServer(ctx)
}

// writeServiceAccountKey writes sa.key/sa.pub, the only key material kube-apiserver insists on
// (its serving certificate is self-signed into --cert-dir).
func writeServiceAccountKey(dir string) error {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(filepath.Join(dir, "sa.key"), priv, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

// Server is the apiserver's URL.
func (c *Cluster) Server() string { return "https://127.0.0.1:" + strconv.Itoa(c.apiPort) }

func (c *Cluster) waitAPIServer(ctx context.Context) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // self-signed loopback test apiserver
	}}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	err := WaitFor(ctx, 250*time.Millisecond, "kube-apiserver /readyz", func() (bool, error) {
		if p := c.Proc("kube-apiserver"); p != nil && p.Exited() {
			return false, fmt.Errorf("kube-apiserver exited:\n%s", p.Tail(20))
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.Server()+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := hc.Do(req)
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("readyz: %s", resp.Status)
	})
	if err != nil {
		return fmt.Errorf("%w\nkube-apiserver log:\n%s", err, TailFile(filepath.Join(c.Dir, "kube-apiserver.log"), 20))
	}
	return nil
}

func (c *Cluster) writeKubeconfig() error {
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: gpushare-e2e
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: gpushare-e2e
  context: {cluster: gpushare-e2e, user: admin}
current-context: gpushare-e2e
`, c.Server(), c.token)
	if err := os.WriteFile(c.Kubeconfig, []byte(kc), 0o600); err != nil {
		return err
	}
	c.RestConfig = &rest.Config{
		Host:            c.Server(),
		BearerToken:     c.token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             200,
		Burst:           400,
	}
	cs, err := kubernetes.NewForConfig(c.RestConfig)
	c.Client = cs
	return err
}

func (c *Cluster) createDefaultServiceAccount(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	sa := &v1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: "default"}}
	return WaitFor(ctx, 200*time.Millisecond, "default ServiceAccount", func() (bool, error) {
		_, err := c.Client.CoreV1().ServiceAccounts("default").Create(ctx, sa, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			return true, nil
		}
		return false, err
	})
}
