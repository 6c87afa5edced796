package scheduler

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"k8s.io/klog/v2"

	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

// BenchmarkForwardedFilter is one filter at 1,000 nodes sent over HTTPS straight to the leader
// (direct) and through a follower that forwards it (forwarded): the difference is what a
// follower adds to every call kube-scheduler makes through it, in time and in the CPU of both
// replicas (the benchmark runs them in one process). The client speaks HTTP/2, as
// kube-scheduler does.
func BenchmarkForwardedFilter(b *testing.B) {
	bc := newBenchCluster(b, 1000, "binpack")
	leaderSrv := httptest.NewUnstartedServer(NewHandler(bc.ext, func() bool { return true }, HandlerConfig{MaxBody: 64 << 20}, klog.Background()))
	leaderSrv.EnableHTTP2 = true
	leaderSrv.StartTLS()
	b.Cleanup(leaderSrv.Close)

	follower := newBenchCluster(b, 1000, "binpack", WithLeadership(&stubLeadership{}))
	fcfg := &server.ForwardConfig{Leader: func() string { return leaderSrv.Listener.Addr().String() }, Transport: leaderSrv.Client().Transport, Self: "follower"}
	followerSrv := httptest.NewUnstartedServer(NewHandler(follower.ext, func() bool { return true }, HandlerConfig{MaxBody: 64 << 20, Forward: fcfg}, klog.Background()))
	followerSrv.EnableHTTP2 = true
	followerSrv.StartTLS()
	b.Cleanup(followerSrv.Close)

	body, err := json.Marshal(bc.args)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		srv  *httptest.Server
	}{{"direct", leaderSrv}, {"forwarded", followerSrv}} {
		b.Run(c.name, func(b *testing.B) {
			client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}} //nolint:gosec // G402: a test server
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Post(c.srv.URL+Prefix+"/filter", "application/json", bytes.NewReader(body))
				if err != nil {
					b.Fatal(err)
				}
				answer, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || !bytes.Contains(answer, []byte(`"NodeNames":[`)) {
					b.Fatalf("filter = %d %s %v", resp.StatusCode, answer, err)
				}
			}
		})
	}
}
