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

// Extender is a running gpushare extender process.
type Extender struct {
	Port int
	Proc *Proc
}

// Host is host:port of the extender.
func (e *Extender) Host() string { return "127.0.0.1:" + strconv.Itoa(e.Port) }

// URL is the extender's base URL, e.g. http://127.0.0.1:1234.
func (e *Extender) URL() string { return "http://" + e.Host() }

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
	args := append(extenderArgs(c.Kubeconfig, port), extra...)
	p, err := c.start(name, bin, args)
	if err != nil {
		return nil, err
	}
	e := &Extender{Port: port, Proc: p}
	return e, c.WaitExtenderReady(ctx, e)
}

// WaitExtenderReady polls /readyz until it answers 200.
func (c *Cluster) WaitExtenderReady(ctx context.Context, e *Extender) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	return WaitFor(ctx, 100*time.Millisecond, "extender /readyz", func() (bool, error) {
		if e.Proc.Exited() {
			return false, fmt.Errorf("extender exited:\n%s", e.Proc.Tail(20))
		}
		resp, err := hc.Get(e.URL() + "/readyz")
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
	if err := GetJSON(ctx, e.URL()+"/readyz", &ready); err != nil {
		return false, err
	}
	return ready.Leading == "true", nil
}

// GetJSON GETs url and decodes the JSON answer into out.
func GetJSON(ctx context.Context, url string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL()+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", e.URL(), resp.Status)
	}
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
