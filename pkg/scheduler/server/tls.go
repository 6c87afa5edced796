package server

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"
	"k8s.io/klog/v2"
)

// TLSFiles names the PEM files of the extender's HTTPS listener.
type TLSFiles struct {
	// CertFile and KeyFile are the serving certificate (with its chain) and its private key.
	CertFile, KeyFile string
	// ClientCAFile, when set, is the CA bundle client certificates must chain to; the
	// extender's verbs, /inspect and /debug then refuse a request without such a certificate
	// (RequireClientCert). Probes (/healthz, /readyz, /readyz/leader, /version) and /metrics stay open.
	ClientCAFile string
}

// ErrNoClientCert answers a guarded route called without a verified client certificate.
var ErrNoClientCert = errors.New("a client certificate signed by the extender's --client-ca-file is required")

// RequireClientCert refuses a request with 401, and calls refused, unless TLS verified the
// client's certificate (against TLSFiles.ClientCAFile).
func RequireClientCert(handle httprouter.Handle, refused func()) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, ps httprouter.Params) {
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			refused()
			WriteError(w, http.StatusUnauthorized, fmt.Errorf("%s: %w", r.URL.Path, ErrNoClientCert))
			return
		}
		handle(w, r, ps)
	}
}

// reloadCheckPeriod is how often, at most, a handshake looks whether the files changed.
const reloadCheckPeriod = time.Second

// ServerConfig loads the files and returns a TLS configuration that serves them, reloading the
// certificate, key and client CA when a file changes on disk (a rotated Secret): each
// handshake after reloadCheckPeriod compares the files' size and modification time. A reload
// that fails keeps the last good files and logs why.
func (f TLSFiles) ServerConfig(logger klog.Logger) (*tls.Config, error) {
	return f.serverConfig(logger, reloadCheckPeriod)
}

func (f TLSFiles) serverConfig(logger klog.Logger, period time.Duration) (*tls.Config, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("a serving certificate and key are both required")
	}
	r := &tlsReloader{files: f, logger: logger, period: period, stamps: map[string]fileStamp{}}
	if err := r.load(); err != nil {
		return nil, err
	}
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		NextProtos:         nextProtos(),
		GetConfigForClient: r.configForClient,
	}, nil
}

// nextProtos offers HTTP/2 first: kube-scheduler's client speaks it, and all its calls then
// share one connection (one TLS handshake) however many binds run at once.
func nextProtos() []string { return []string{"h2", "http/1.1"} }

// fileStamp identifies a file's content cheaply.
type fileStamp struct {
	size int64
	mod  time.Time
}

// tlsReloader holds the current certificate and client CA pool.
type tlsReloader struct {
	files  TLSFiles
	logger klog.Logger
	period time.Duration // between looks at the files

	mu        sync.Mutex
	current   *tls.Config
	stamps    map[string]fileStamp
	lastCheck time.Time
}

func (r *tlsReloader) paths() []string {
	p := []string{r.files.CertFile, r.files.KeyFile}
	if r.files.ClientCAFile != "" {
		p = append(p, r.files.ClientCAFile)
	}
	return p
}

// load reads every file and builds the per-connection configuration. Callers hold r.mu or
// own r alone.
func (r *tlsReloader) load() error {
	stamps := map[string]fileStamp{}
	for _, p := range r.paths() {
		st, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("TLS file: %w", err)
		}
		stamps[p] = fileStamp{size: st.Size(), mod: st.ModTime()}
	}
	cert, err := tls.LoadX509KeyPair(r.files.CertFile, r.files.KeyFile)
	if err != nil {
		return fmt.Errorf("serving certificate %s / key %s: %w", r.files.CertFile, r.files.KeyFile, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: nextProtos(), Certificates: []tls.Certificate{cert}}
	if r.files.ClientCAFile != "" {
		pem, err := os.ReadFile(r.files.ClientCAFile)
		if err != nil {
			return fmt.Errorf("client CA: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("client CA %s: no PEM certificate in it", r.files.ClientCAFile)
		}
		// Verify a certificate when one is given; the routes that need one refuse requests
		// without it (probes carry none).
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.VerifyClientCertIfGiven
	}
	r.current, r.stamps = cfg, stamps
	return nil
}

// changed reports whether any file differs from what was loaded.
func (r *tlsReloader) changed() bool {
	for _, p := range r.paths() {
		st, err := os.Stat(p)
		if err != nil {
			return true // load says why
		}
		if (fileStamp{size: st.Size(), mod: st.ModTime()}) != r.stamps[p] {
			return true
		}
	}
	return false
}

func (r *tlsReloader) configForClient(*tls.ClientHelloInfo) (*tls.Config, error) {
	return r.config(), nil
}

// config is the current configuration, reloaded first if a file changed.
func (r *tlsReloader) config() *tls.Config {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.lastCheck) >= r.period {
		r.lastCheck = now
		if r.changed() {
			if err := r.load(); err != nil {
				r.logger.Error(err, "Reloading TLS files failed; serving the previous ones")
			} else {
				r.logger.Info("Reloaded TLS files", "cert", r.files.CertFile, "clientCA", r.files.ClientCAFile)
			}
		}
	}
	return r.current
}

// PeerTransport reaches the other replicas of the extender, for a follower to forward the
// verbs to the leader (forward.go). All replicas serve the same files (one Secret), so it
// presents this replica's serving certificate as its client certificate, which the leader
// verifies against its --client-ca-file like kube-scheduler's: the serving certificate must
// allow client authentication (extended key usage clientAuth) and chain to that CA, as
// hack/extender-certs.sh makes it. It accepts a leader whose certificate chains to the same
// CA and carries the first name of this replica's own serving certificate (a follower dials
// the leader's pod IP, which the certificate need not name). The files are reloaded as the
// server's are.
func (f TLSFiles) PeerTransport(logger klog.Logger) (*http.Transport, error) {
	if f.ClientCAFile == "" {
		return nil, errors.New("forwarding to the leader needs --client-ca-file: the replicas authenticate each other with it")
	}
	r := &tlsReloader{files: f, logger: logger, period: reloadCheckPeriod, stamps: map[string]fileStamp{}}
	if err := r.load(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verified by VerifyConnection below: against the CA and this replica's own name,
		// not the address dialled.
		InsecureSkipVerify: true, //nolint:gosec // G402: VerifyConnection verifies the chain and the name
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &r.config().Certificates[0], nil
		},
		VerifyConnection: func(cs tls.ConnectionState) error { return verifyPeer(r.config(), cs) },
	}
	return &http.Transport{
		TLSClientConfig:     cfg,
		ForceAttemptHTTP2:   true,
		DialContext:         (&net.Dialer{Timeout: time.Second, KeepAlive: 15 * time.Second}).DialContext,
		TLSHandshakeTimeout: 2 * time.Second,
		MaxIdleConnsPerHost: 8,
		IdleConnTimeout:     90 * time.Second,
	}, nil
}

// verifyPeer verifies a replica's serving certificate: it chains to cfg's client CA and names
// what cfg's own serving certificate names first.
func verifyPeer(cfg *tls.Config, cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the replica presented no certificate")
	}
	own := cfg.Certificates[0].Leaf
	if own == nil {
		var err error
		if own, err = x509.ParseCertificate(cfg.Certificates[0].Certificate[0]); err != nil {
			return fmt.Errorf("this replica's serving certificate: %w", err)
		}
	}
	opts := x509.VerifyOptions{Roots: cfg.ClientCAs, Intermediates: x509.NewCertPool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	switch {
	case len(own.DNSNames) > 0:
		opts.DNSName = own.DNSNames[0]
	case len(own.IPAddresses) > 0:
		opts.DNSName = own.IPAddresses[0].String()
	default:
		return errors.New("this replica's serving certificate names no DNS name or IP address to check the leader's against")
	}
	for _, c := range cs.PeerCertificates[1:] {
		opts.Intermediates.AddCert(c)
	}
	if _, err := cs.PeerCertificates[0].Verify(opts); err != nil {
		return fmt.Errorf("the replica's certificate: %w", err)
	}
	return nil
}
