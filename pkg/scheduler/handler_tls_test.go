package scheduler

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/internal/testpki"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

// tlsServer serves the extender's routes over HTTPS with files; it returns the base URL.
func tlsServer(t *testing.T, files server.TLSFiles, requireCert bool) string {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	nodes, pods := routeFixture()
	ext, _ := extenderOn(logger, nodes, pods)
	cfg, err := files.ServerConfig(logger)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:           NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: testBodyLimit, RequireClientCert: requireCert}, logger),
		ReadHeaderTimeout: 5 * time.Second,
	}
	go func() { _ = srv.Serve(tls.NewListener(ln, cfg)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "https://" + ln.Addr().String()
}

// call does one request with client TLS configuration cfg and returns the status, or the
// transport error's text.
func call(t *testing.T, cfg *tls.Config, method, url, body string) (int, string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestTLSClientCertificates: with RequireClientCert, every verb, /inspect and /debug/audit
// refuse a client without a certificate (401), the probes stay open, and a client with the
// certificate is served. (The handshake of a certificate another CA signed fails in
// server.TLSFiles, whose own tests show it.)
func TestTLSClientCertificates(t *testing.T) {
	dir := t.TempDir()
	pki, err := testpki.New(dir, "", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	withCert, err := pki.ClientTLS(true)
	if err != nil {
		t.Fatal(err)
	}
	withoutCert, err := pki.ClientTLS(false)
	if err != nil {
		t.Fatal(err)
	}
	base := tlsServer(t, server.TLSFiles{CertFile: pki.ServerCert, KeyFile: pki.ServerKey, ClientCAFile: pki.CAFile}, true)
	bind := `{"podName":"p","podNamespace":"default","podUID":"uid-p","node":"no-such-node"}`
	tests := []struct {
		name         string
		client       *tls.Config
		method, path string
		body         string
		wantStatus   int
		wantBody     string // substring of the answer
	}{
		{"bind without a client certificate", withoutCert, http.MethodPost, Prefix + "/bind", bind, http.StatusUnauthorized, "client certificate signed by the extender's --client-ca-file is required"},
		{"filter without a client certificate", withoutCert, http.MethodPost, Prefix + "/filter", `{}`, http.StatusUnauthorized, "client certificate"},
		{"prioritize without a client certificate", withoutCert, http.MethodPost, Prefix + "/prioritize", `{}`, http.StatusUnauthorized, "client certificate"},
		{"preempt without a client certificate", withoutCert, http.MethodPost, Prefix + "/preempt", `{}`, http.StatusUnauthorized, "client certificate"},
		{"inspect without a client certificate", withoutCert, http.MethodGet, Prefix + "/inspect", "", http.StatusUnauthorized, "client certificate"},
		{"inspect of a node without a client certificate", withoutCert, http.MethodGet, Prefix + "/inspect/n1", "", http.StatusUnauthorized, "client certificate"},
		{"audit without a client certificate", withoutCert, http.MethodGet, Prefix + "/debug/audit", "", http.StatusUnauthorized, "client certificate"},
		{"readiness probe without a client certificate", withoutCert, http.MethodGet, "/readyz", "", http.StatusOK, "ready"},
		{"liveness probe without a client certificate", withoutCert, http.MethodGet, "/healthz", "", http.StatusOK, "ok"},
		{"leader check without a client certificate", withoutCert, http.MethodGet, "/readyz/leader", "", http.StatusOK, "ready"},
		{"inspect with the client certificate", withCert, http.MethodGet, Prefix + "/inspect", "", http.StatusOK, `"name":"n1"`},
		{"bind with the client certificate reaches bind", withCert, http.MethodPost, Prefix + "/bind", bind, http.StatusOK, "no-such-node"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(t, tc.client, tc.method, base+tc.path, tc.body)
			if status != tc.wantStatus || !strings.Contains(body, tc.wantBody) {
				t.Errorf("%s %s = %d %q, want %d and %q", tc.method, tc.path, status, body, tc.wantStatus, tc.wantBody)
			}
		})
	}
}
