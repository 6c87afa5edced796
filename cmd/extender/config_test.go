package main

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gpushare/gpushare/pkg/placement/policies"
	"github.com/gpushare/gpushare/pkg/scheduler/server"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*config)
		wantErr []string // substrings the error must contain; none means valid
	}{
		{name: "HTTPS with a client CA", change: func(*config) {}},
		{name: "HTTPS without a client CA", change: func(c *config) { c.tls.ClientCAFile = "" }},
		{name: "plain HTTP when asked", change: func(c *config) { c.tls, c.plainHTTP = server.TLSFiles{}, true }},
		{
			name: "neither TLS files nor --plain-http", change: func(c *config) { c.tls = server.TLSFiles{} },
			wantErr: []string{"--tls-cert-file and --tls-private-key-file are required", "--plain-http serves plain HTTP", "127.0.0.1:39999"},
		},
		{name: "a key without a certificate", change: func(c *config) { c.tls.CertFile = "" }, wantErr: []string{"--tls-cert-file and --tls-private-key-file are required"}},
		{name: "plain HTTP and TLS files", change: func(c *config) { c.plainHTTP = true }, wantErr: []string{"--plain-http and the TLS files"}},
		{name: "collector target zero", change: func(c *config) { c.gcPercent = 0 }, wantErr: []string{"--gc-percent must be positive"}},
		{name: "collector headroom", change: func(c *config) { c.gcMinHeadroom = resource.MustParse("32Mi") }},
		{name: "negative collector headroom", change: func(c *config) { c.gcMinHeadroom = resource.MustParse("-1Mi") }, wantErr: []string{"--gc-min-headroom must be between 0 and 1Ti, not -1Mi"}},
		{name: "events at zero per second", change: func(c *config) { c.eventQPS = 0 }, wantErr: []string{"--event-qps must be positive"}},
		{name: "no events, no event rate", change: func(c *config) { c.bindEvents, c.eventQPS = false, 0 }},
		{name: "spread policy", change: func(c *config) { c.policy = "spread" }},
		{name: "safety margin eats the lease", change: func(c *config) { c.election.SafetyMargin = 7500 * time.Millisecond }, wantErr: []string{"--leader-elect:", "safety margin < lease duration - retry period"}},
		{name: "negative safety margin", change: func(c *config) { c.election.SafetyMargin = -time.Second }, wantErr: []string{"0 <= safety margin"}},
		{name: "no safety margin", change: func(c *config) { c.election.SafetyMargin = 0 }},
		{name: "fence lag of a whole lease", change: func(c *config) { c.election.FenceLag = 8 * time.Second }, wantErr: []string{"--leader-elect:", "0 <= fence lag < lease duration"}},
		{name: "no fence lag", change: func(c *config) { c.election.FenceLag = 0 }},
		{name: "MiB unit", change: func(c *config) { c.names.Unit = resource.MustParse("1Mi") }},
		{name: "unknown policy", change: func(c *config) { c.policy = "fastest" }, wantErr: []string{`unknown policy "fastest"`, "binpack", "spread"}},
		{name: "zero qps", change: func(c *config) { c.qps = 0 }, wantErr: []string{"--kube-api-qps and --kube-api-burst must be positive"}},
		{name: "negative burst", change: func(c *config) { c.burst = -1 }, wantErr: []string{"--kube-api-qps and --kube-api-burst must be positive"}},
		{name: "tiny body limit", change: func(c *config) { c.maxBody = 100 }, wantErr: []string{"--max-body-bytes must be at least 1024"}},
		{name: "unit below 1Mi", change: func(c *config) { c.names.Unit = resource.MustParse("512Ki") }, wantErr: []string{"unit 512Ki must be a whole number of MiB"}},
		{name: "unit not a whole MiB", change: func(c *config) { c.names.Unit = resource.MustParse("1G") }, wantErr: []string{"unit 1G must be a whole number of MiB"}},
		{name: "DRA mode", change: func(c *config) { c.draMode = true }},
		{name: "DRA mode without a driver", change: func(c *config) { c.draMode, c.draDriver = true, "" }, wantErr: []string{"--dra-driver must name the DRA driver"}},
		{name: "no driver, DRA mode off", change: func(c *config) { c.draDriver = "" }},
		{name: "no room for claim templates", change: func(c *config) { c.draMaxTemplates = 0 }, wantErr: []string{"--dra-max-templates must be positive"}},
		{name: "empty resource name", change: func(c *config) { c.names.Resource = " " }, wantErr: []string{"resource name is empty"}},
		{
			name:    "every problem is reported at once",
			change:  func(c *config) { c.policy, c.qps, c.maxBody = "x", 0, 0 },
			wantErr: []string{`unknown policy "x"`, "kube-api-qps", "max-body-bytes"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := defaultConfig()
			c.tls = server.TLSFiles{CertFile: "tls.crt", KeyFile: "tls.key", ClientCAFile: "ca.crt"}
			tc.change(&c)
			err := c.validate(policies.NewRegistry())
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Errorf("validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("validate() = nil, want an error containing %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("validate() = %q, want it to contain %q", err, want)
				}
			}
		})
	}
}

func TestListenAddress(t *testing.T) {
	for _, tc := range []struct {
		name    string
		address string
		plain   bool
		want    string
	}{
		{"HTTPS listens everywhere", "", false, ":39999"},
		{"plain HTTP listens on loopback", "", true, "127.0.0.1:39999"},
		{"--address wins", "0.0.0.0:8080", true, "0.0.0.0:8080"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := defaultConfig()
			c.address, c.plainHTTP = tc.address, tc.plain
			if got := c.listenAddress(); got != tc.want {
				t.Errorf("listenAddress() = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestAdvertiseAddress: the address the Lease advertises for followers to forward to.
func TestAdvertiseAddress(t *testing.T) {
	tests := []struct {
		name, flag, address, podIP, want string
	}{
		{name: "flag wins", flag: "10.0.0.9:1234", address: "127.0.0.1:39999", podIP: "10.0.0.5", want: "10.0.0.9:1234"},
		{name: "listen address with a host", address: "127.0.0.1:4000", podIP: "10.0.0.5", want: "127.0.0.1:4000"},
		{name: "all interfaces: the pod IP and the port", address: ":39999", podIP: "10.0.0.5", want: "10.0.0.5:39999"},
		{name: "IPv6 wildcard", address: "[::]:39999", podIP: "fd00::5", want: "[fd00::5]:39999"},
		{name: "nothing known", address: ":39999", want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("POD_IP", tt.podIP)
			c := defaultConfig()
			c.address, c.election.Address = tt.address, tt.flag
			if got := c.advertiseAddress(); got != tt.want {
				t.Errorf("advertiseAddress() = %q, want %q", got, tt.want)
			}
		})
	}
}
