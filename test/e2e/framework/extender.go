package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ExtenderPrefix is the URL path prefix of the extender's routes.
const ExtenderPrefix = "/gpushare-scheduler"

// Extender is a running gpushare extender process, served over HTTPS.
type Extender struct {
	Port int
	Proc *Proc
	// Client trusts the extender's certificate and presents the cluster's client certificate.
	Client *http.Client
}

// Host is host:port of the extender.
func (e *Extender) Host() string { return "127.0.0.1:" + strconv.Itoa(e.Port) }

// URL is the extender's base URL, e.g. https://127.0.0.1:1234.
func (e *Extender) URL() string { return "https://" + e.Host() }

// GetJSON GETs path (e.g. /readyz) from the extender with its client certificate and decodes
// the JSON answer into out.
func (e *Extender) GetJSON(ctx context.Context, path string, out any) error {
	return GetJSON(ctx, e.Client, e.URL()+path, out)
}

// ExtenderClient is an HTTP client of the cluster's extenders: it trusts their CA and, with
// cert, presents the client certificate.
func (c *Cluster) ExtenderClient(cert bool) (*http.Client, error) {
	cfg, err := c.PKI.ClientTLS(cert)
	if err != nil {
		return nil, err
	}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, MaxIdleConnsPerHost: 4}}, nil
}

// StartExtender starts the extender binary on port (0: a free one) with extra flags and waits
// for /readyz (its informers have synced).
func (c *Cluster) StartExtender(ctx context.Context, bin string, port int, extra ...string) (*Extender, error) {
	return c.StartExtenderAs(ctx, "extender", bin, port, extra...)
}

// StartExtenderAs is StartExtender for one of several replicas: name names its process and log.
func (c *Cluster) StartExtenderAs(ctx context.Context, name, bin string, port int, extra ...string) (*Extender, error) {
	if port == 0 {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		port = p
	}
	client, err := c.ExtenderClient(true)
	if err != nil {
		return nil, err
	}
	args := append(extenderArgs(c.Kubeconfig, port, c.PKI, c.HoldKeyFile), extra...)
	p, err := c.start(name, bin, args)
	if err != nil {
		return nil, err
	}
	e := &Extender{Port: port, Proc: p, Client: client}
	return e, c.WaitExtenderReady(ctx, e)
}

// WaitExtenderReady polls /readyz until it answers 200.
func (c *Cluster) WaitExtenderReady(ctx context.Context, e *Extender) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return WaitFor(ctx, 100*time.Millisecond, "extender /readyz", func() (bool, error) {
		if e.Proc.Exited() {
			return false, fmt.Errorf("extender exited:\n%s", e.Proc.Tail(20))
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, e.URL()+"/readyz", nil)
		if err != nil {
			return false, err
		}
		resp, err := e.Client.Do(req)
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Errorf("readyz: %s", resp.Status)
	})
}

// Leading reports whether the extender says, on /readyz, that it leads (binds).
func (e *Extender) Leading(ctx context.Context) (bool, error) {
	var ready struct {
		Leading string `json:"leading"`
	}
	if err := e.GetJSON(ctx, "/readyz", &ready); err != nil {
		return false, err
	}
	return ready.Leading == "true", nil
}

// GetJSON GETs url with client and decodes the JSON answer into out.
func GetJSON(ctx context.Context, client *http.Client, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("GET %s: decode: %w\n%s", url, err, body)
	}
	return nil
}

// Metrics reads the extender's /metrics (Prometheus text format): series (with its labels, as
// printed) → value.
func (e *Extender) Metrics(ctx context.Context) (map[string]float64, error) {
	return ScrapeMetrics(ctx, e.Client, e.URL()+"/metrics")
}

// ScrapeMetrics reads a /metrics URL (Prometheus text format): series (with its labels, as
// printed) → value.
func ScrapeMetrics(ctx context.Context, client *http.Client, url string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return ParseMetrics(body)
}

// ParseMetrics reads metrics in Prometheus text format: series (with its labels, as printed)
// → value.
func ParseMetrics(body []byte) (map[string]float64, error) {
	out := map[string]float64{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics line %q: %w", line, err)
		}
		out[line[:i]] = v
	}
	return out, nil
}
