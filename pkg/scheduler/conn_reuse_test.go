package scheduler

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/klog/v2/ktesting"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/gpushare/gpushare/internal/testpki"
	st "github.com/gpushare/gpushare/pkg/cache/testing"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

// TestKubeSchedulerClientReusesConnections calls prioritize with large answers the way
// kube-scheduler's extender client does (its transport defaults; decode the JSON value, then
// close the body) and counts the connections the extender accepted: one, over HTTP/2 and over
// HTTP/1.1 alike. A chunked answer made that client drop its connection after every call, and
// each call paid a TLS handshake on both sides.
func TestKubeSchedulerClientReusesConnections(t *testing.T) {
	pki, err := testpki.New(t.TempDir(), "", "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 600)
	for i := range names {
		names[i] = fmt.Sprintf("node-%04d", i)
	}
	body, err := json.Marshal(extenderv1.ExtenderArgs{Pod: st.MakePod().Name("p").GPUMem(4).Obj(), NodeNames: &names})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name      string
		http1Only bool
		wantProto string
	}{
		{name: "HTTP/2", wantProto: "HTTP/2.0"},
		{name: "HTTP/1.1", http1Only: true, wantProto: "HTTP/1.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, conns := countingTLSServer(t, pki)
			clientTLS, err := pki.ClientTLS(true)
			if err != nil {
				t.Fatal(err)
			}
			var tr http.RoundTripper
			if tc.http1Only { // as kube-scheduler with DISABLE_HTTP2 set
				tr = &http.Transport{TLSClientConfig: clientTLS, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}
			} else {
				tr = utilnet.SetTransportDefaults(&http.Transport{TLSClientConfig: clientTLS})
			}
			client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
			for i := range 20 {
				resp, err := client.Post(url+Prefix+"/prioritize", "application/json", strings.NewReader(string(body)))
				if err != nil {
					t.Fatal(err)
				}
				var got extenderv1.HostPriorityList
				err = json.NewDecoder(resp.Body).Decode(&got)
				_ = resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || len(got) != len(names) {
					t.Fatalf("call %d: status %d, %d scores, error %v", i, resp.StatusCode, len(got), err)
				}
				if resp.Proto != tc.wantProto {
					t.Fatalf("call %d spoke %s, want %s", i, resp.Proto, tc.wantProto)
				}
			}
			if n := conns.Load(); n != 1 {
				t.Errorf("20 calls opened %d connections, want 1", n)
			}
		})
	}
}

// countingTLSServer serves the extender's routes over mutual TLS and counts the connections
// it accepts.
func countingTLSServer(t *testing.T, pki *testpki.PKI) (string, *atomic.Int64) {
	t.Helper()
	logger, _ := ktesting.NewTestContext(t)
	nodes, pods := routeFixture()
	ext, _ := extenderOn(logger, nodes, pods)
	cfg, err := server.TLSFiles{CertFile: pki.ServerCert, KeyFile: pki.ServerKey, ClientCAFile: pki.CAFile}.ServerConfig(logger)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := &atomic.Int64{}
	srv := &http.Server{
		Handler:           NewHandler(ext, func() bool { return true }, HandlerConfig{MaxBody: testBodyLimit, RequireClientCert: true}, logger),
		ReadHeaderTimeout: 5 * time.Second,
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				conns.Add(1)
			}
		},
	}
	go func() { _ = srv.Serve(tls.NewListener(ln, cfg)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "https://" + ln.Addr().String(), conns
}
