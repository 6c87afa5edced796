package server

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/julienschmidt/httprouter"
	"k8s.io/klog/v2/ktesting"

	"github.com/gpushare/gpushare/internal/testpki"
)

// tlsServer serves, over HTTPS with files, /guarded behind RequireClientCert and /open without;
// it returns the base URL and the count of refused requests. It looks at the files on every
// handshake.
func tlsServer(t *testing.T, files TLSFiles) (string, *atomic.Int32) {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	cfg, err := files.serverConfig(logger, 0)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ok := func(w http.ResponseWriter, _ *http.Request, _ httprouter.Params) {
		WriteJSON(w, http.StatusOK, "served")
	}
	r := httprouter.New()
	refused := &atomic.Int32{}
	r.GET("/guarded", RequireClientCert(ok, func() { refused.Add(1) }))
	r.GET("/open", ok)
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(tls.NewListener(ln, cfg)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "https://" + ln.Addr().String(), refused
}

// call does one request with client TLS configuration cfg and returns the status, or the
// transport error's text.
func call(t *testing.T, cfg *tls.Config, method, url string) (int, string) {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
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

// TestRequireClientCert: a guarded route refuses (401, counted) a client without a
// certificate and serves one whose certificate TLS verified; the server refuses the handshake
// of a certificate another CA signed; an open route serves anyone.
func TestRequireClientCert(t *testing.T) {
	dir := t.TempDir()
	pki, err := testpki.New(dir, "", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testpki.New(dir, "other-", "127.0.0.1")
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
	strangerCert, err := other.ClientTLS(true)
	if err != nil {
		t.Fatal(err)
	}
	strangerCert.RootCAs = withCert.RootCAs
	stranger := strangerCert.Certificates[0]
	strangerCert.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &stranger, nil }
	base, refused := tlsServer(t, TLSFiles{CertFile: pki.ServerCert, KeyFile: pki.ServerKey, ClientCAFile: pki.CAFile})
	for _, tc := range []struct {
		name        string
		client      *tls.Config
		path        string
		wantStatus  int    // 0: the TLS handshake fails
		wantBody    string // substring of the answer or of the error
		wantRefused int32
	}{
		{name: "guarded without a certificate", client: withoutCert, path: "/guarded", wantStatus: http.StatusUnauthorized, wantBody: ErrNoClientCert.Error(), wantRefused: 1},
		{name: "open without a certificate", client: withoutCert, path: "/open", wantStatus: http.StatusOK, wantBody: "served"},
		{name: "guarded with the certificate", client: withCert, path: "/guarded", wantStatus: http.StatusOK, wantBody: "served"},
		{name: "certificate of another CA", client: strangerCert, path: "/open", wantBody: "certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := refused.Load()
			status, body := call(t, tc.client, http.MethodGet, base+tc.path)
			if status != tc.wantStatus || !strings.Contains(body, tc.wantBody) {
				t.Errorf("GET %s = %d %q, want %d and %q", tc.path, status, body, tc.wantStatus, tc.wantBody)
			}
			if got := refused.Load() - before; got != tc.wantRefused {
				t.Errorf("refused counted %d times, want %d", got, tc.wantRefused)
			}
		})
	}
}

func TestTLSReloadsRotatedFiles(t *testing.T) {
	dir := t.TempDir()
	first, err := testpki.New(dir, "first-", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	second, err := testpki.New(dir, "second-", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	// The extender serves copies at fixed paths, as a mounted Secret is.
	files := TLSFiles{CertFile: dir + "/tls.crt", KeyFile: dir + "/tls.key", ClientCAFile: dir + "/ca.crt"}
	install := func(p *testpki.PKI) {
		for src, dst := range map[string]string{p.ServerCert: files.CertFile, p.ServerKey: files.KeyFile, p.CAFile: files.ClientCAFile} {
			b, err := os.ReadFile(src)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(dst+".tmp", b, 0o600); err != nil { //nolint:gosec // G703: paths under t.TempDir()
				t.Fatal(err)
			}
			if err := os.Rename(dst+".tmp", dst); err != nil {
				t.Fatal(err)
			}
		}
	}
	install(first)
	base, _ := tlsServer(t, files)
	clientOf := func(p *testpki.PKI) *tls.Config {
		c, err := p.ClientTLS(true)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	statuses := func() []int {
		a, _ := call(t, clientOf(first), http.MethodGet, base+"/guarded")
		b, _ := call(t, clientOf(second), http.MethodGet, base+"/guarded")
		return []int{a, b}
	}
	if diff := cmp.Diff([]int{http.StatusOK, 0}, statuses()); diff != "" {
		t.Errorf("before rotation, first and second PKI's clients (-want,+got):\n%s", diff)
	}
	install(second)
	if diff := cmp.Diff([]int{0, http.StatusOK}, statuses()); diff != "" {
		t.Errorf("after rotation, first and second PKI's clients (-want,+got):\n%s", diff)
	}
	// A broken rotation keeps the last good files.
	if err := os.WriteFile(files.CertFile, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int{0, http.StatusOK}, statuses()); diff != "" {
		t.Errorf("after a broken rotation (-want,+got):\n%s", diff)
	}
}

func TestTLSFilesRequired(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		files TLSFiles
		want  string
	}{
		{"no key", TLSFiles{CertFile: dir + "/x.crt"}, "a serving certificate and key are both required"},
		{"missing files", TLSFiles{CertFile: dir + "/x.crt", KeyFile: dir + "/x.key"}, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := tc.files.ServerConfig(logger); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ServerConfig() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestPeerTransport: a follower reaches a replica serving the same files with its serving
// certificate as client certificate (the replica's handler sees a verified chain), even though
// it dials an address its certificate does not name first; it refuses a replica whose
// certificate another CA signed, and needs --client-ca-file.
func TestPeerTransport(t *testing.T) {
	dir := t.TempDir()
	pki, err := testpki.New(dir, "", "gpushare-extender.kube-system.svc", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	other, err := testpki.New(dir, "other-", "gpushare-extender.kube-system.svc", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	logger, _ := ktesting.NewTestContext(t)
	files := func(p *testpki.PKI) TLSFiles {
		return TLSFiles{CertFile: p.ServerCert, KeyFile: p.ServerKey, ClientCAFile: p.CAFile}
	}
	serve := func(p *testpki.PKI) string {
		cfg, err := files(p).ServerConfig(logger)
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
				http.Error(w, "no verified client certificate", http.StatusUnauthorized)
				return
			}
			if r.TLS.PeerCertificates[0].Subject.CommonName != "gpushare-extender" {
				http.Error(w, "not the replicas' certificate", http.StatusForbidden)
				return
			}
			_, _ = w.Write([]byte("verified"))
		}))
		srv.TLS = cfg
		srv.StartTLS()
		t.Cleanup(srv.Close)
		return srv.URL
	}
	transport, err := files(pki).PeerTransport(logger)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	resp, err := client.Get(serve(pki))
	if err != nil {
		t.Fatalf("a replica of the same files: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "verified" {
		t.Errorf("a replica of the same files answered %s %q, want 200 from a verified peer", resp.Status, body)
	}
	if resp, err := client.Get(serve(other)); err == nil {
		_ = resp.Body.Close()
		t.Errorf("a replica whose certificate another CA signed was accepted (%s)", resp.Status)
	}
	if _, err := (TLSFiles{CertFile: pki.ServerCert, KeyFile: pki.ServerKey}).PeerTransport(logger); err == nil {
		t.Error("PeerTransport without a client CA succeeded")
	}
}
