package e2e

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/internal/testpki"
	"github.com/gpushare/gpushare/pkg/contract"
	"github.com/gpushare/gpushare/test/e2e/framework"
)

// TestExtenderMutualTLS: kube-scheduler reaches the extender over mutual TLS (the suite's
// every test does; this one checks the configuration it ran with), a client without a
// certificate, or with one of another CA, cannot call bind or read /inspect, and even an
// authenticated caller cannot bind a pod where kube-scheduler would not put it.
func TestExtenderMutualTLS(t *testing.T) {
	e := newEnv(t)
	cards := map[string][]contract.GPU{
		"gpu-a": framework.Cards("gpu-a", "Tesla T4", 16, 2),
		"gpu-b": framework.Cards("gpu-b", "Tesla T4", 16, 2),
	}
	e.nodes(cards)

	cfg, err := os.ReadFile(filepath.Join(e.c.Dir, "kube-scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"urlPrefix: https://", "enableHTTPS: true", "certFile: " + e.c.PKI.ClientCert, "caFile: " + e.c.PKI.CAFile} {
		if !strings.Contains(string(cfg), want) {
			t.Errorf("kube-scheduler's configuration lacks %q:\n%s", want, cfg)
		}
	}
	e.create(e.gpuPod("through-tls", 4))
	if p := e.waitBound("through-tls", time.Minute); p.Annotations[contract.AnnotationAllocation] == "" {
		t.Fatalf("pod bound without a placement: %v", p.Annotations)
	}

	// Pods no scheduler picks up: the callers below try to bind them.
	parked := func(name string, units int64, mutate func(*v1.Pod)) *v1.Pod {
		p := e.gpuPod(name, units)
		p.Spec.SchedulerName = "nobody"
		if mutate != nil {
			mutate(p)
		}
		e.create(p)
		got, err := e.c.Client.CoreV1().Pods("default").Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	pinned := parked("pinned-to-a", 4, func(p *v1.Pod) { p.Spec.NodeSelector = map[string]string{"kubernetes.io/hostname": "gpu-a"} })
	cpuOnly := parked("cpu-only", 0, func(p *v1.Pod) { p.Spec.Containers[0].Resources = v1.ResourceRequirements{} })
	bindBody := func(p *v1.Pod, node string) string {
		b, err := json.Marshal(extenderv1.ExtenderBindingArgs{PodName: p.Name, PodNamespace: p.Namespace, PodUID: p.UID, Node: node})
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	noCert, err := e.c.ExtenderClient(false)
	if err != nil {
		t.Fatal(err)
	}
	other, err := testpki.New(t.TempDir(), "", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	strangerTLS, err := other.ClientTLS(true)
	if err != nil {
		t.Fatal(err)
	}
	ours, err := e.c.PKI.ClientTLS(false)
	if err != nil {
		t.Fatal(err)
	}
	strangerTLS.RootCAs = ours.RootCAs // trusts the extender, presents a certificate of another CA
	strangerCert := strangerTLS.Certificates[0]
	strangerTLS.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &strangerCert, nil }
	stranger := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: strangerTLS}}

	pre := e.ext.URL() + framework.ExtenderPrefix
	tests := []struct {
		name       string
		client     *http.Client
		method     string
		url, body  string
		wantStatus int    // 0: refused in the TLS handshake
		want       string // in the answer (or the error)
	}{
		{"bind without a certificate", noCert, http.MethodPost, pre + "/bind", bindBody(pinned, "gpu-b"), http.StatusUnauthorized, "client certificate signed by the extender's --client-ca-file is required"},
		{"filter without a certificate", noCert, http.MethodPost, pre + "/filter", `{}`, http.StatusUnauthorized, "client certificate"},
		{"inspect without a certificate", noCert, http.MethodGet, pre + "/inspect", "", http.StatusUnauthorized, "client certificate"},
		{"audit without a certificate", noCert, http.MethodGet, pre + "/debug/audit", "", http.StatusUnauthorized, "client certificate"},
		{"readiness probe without a certificate", noCert, http.MethodGet, e.ext.URL() + "/readyz", "", http.StatusOK, "ready"},
		{"bind with another CA's certificate", stranger, http.MethodPost, pre + "/bind", bindBody(pinned, "gpu-b"), 0, "certificate"},
		{"authenticated bind against the node selector", e.ext.Client, http.MethodPost, pre + "/bind", bindBody(pinned, "gpu-b"), http.StatusOK, "the pod may not run on the node: its node selector or required node affinity does not match"},
		{"authenticated bind of a pod without gpu-mem", e.ext.Client, http.MethodPost, pre + "/bind", bindBody(cpuOnly, "gpu-a"), http.StatusOK, "the extender binds only pods it places on GPUs"},
		{"authenticated bind to an unknown node", e.ext.Client, http.MethodPost, pre + "/bind", bindBody(pinned, "no-such-node"), http.StatusOK, "unknown node"},
		{"authenticated inspect", e.ext.Client, http.MethodGet, pre + "/inspect", "", http.StatusOK, "through-tls"},
	}
	for _, tc := range tests {
		req, err := http.NewRequestWithContext(e.ctx, tc.method, tc.url, bytes.NewBufferString(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		status, answer := 0, ""
		resp, err := tc.client.Do(req)
		if err != nil {
			answer = err.Error()
		} else {
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			status, answer = resp.StatusCode, string(b)
		}
		if status != tc.wantStatus || !strings.Contains(answer, tc.want) {
			t.Errorf("%s: %s %s = %d %q, want %d and %q", tc.name, tc.method, tc.url, status, answer, tc.wantStatus, tc.want)
		} else {
			t.Logf("%s: %d %s", tc.name, status, strings.TrimSpace(answer))
		}
	}
	for _, name := range []string{"pinned-to-a", "cpu-only"} {
		p, err := e.c.Client.CoreV1().Pods("default").Get(e.ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" || p.Annotations[contract.AnnotationAllocation] != "" {
			t.Errorf("pod %s was bound to %q with placement %q by a refused call", name, p.Spec.NodeName, p.Annotations[contract.AnnotationAllocation])
		}
	}
	e.checkConsistent(cards)
}
