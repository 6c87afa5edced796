// Package testpki writes a throw-away certificate authority, a serving certificate and a client
// certificate for tests of the extender's HTTPS (unit tests and the e2e suite's mutual TLS
// between kube-scheduler and the extender). Never use it outside tests: keys are ECDSA P-256
// made on the fly and kept on disk unencrypted.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// PKI names the PEM files New wrote.
type PKI struct {
	// CAFile is the CA certificate that signed both certificates below.
	CAFile string
	// ServerCert and ServerKey are the serving certificate, valid for the hosts given to New.
	ServerCert, ServerKey string
	// ClientCert and ClientKey are a client certificate (CN "gpushare-test-client").
	ClientCert, ClientKey string
}

// New makes a CA in dir and signs with it a serving certificate for hosts (IP addresses or DNS
// names) and a client certificate; prefix names the files (prefix+"ca.crt", ...).
func New(dir, prefix string, hosts ...string) (*PKI, error) {
	caKey, caCert, err := newCA(prefix + "test-ca")
	if err != nil {
		return nil, err
	}
	p := &PKI{
		CAFile:     filepath.Join(dir, prefix+"ca.crt"),
		ServerCert: filepath.Join(dir, prefix+"server.crt"), ServerKey: filepath.Join(dir, prefix+"server.key"),
		ClientCert: filepath.Join(dir, prefix+"client.crt"), ClientKey: filepath.Join(dir, prefix+"client.key"),
	}
	if err := writePEM(p.CAFile, "CERTIFICATE", caCert.Raw); err != nil {
		return nil, err
	}
	server := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "gpushare-extender"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, // clientAuth: replicas forward to the leader with it
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			server.IPAddresses = append(server.IPAddresses, ip)
		} else {
			server.DNSNames = append(server.DNSNames, h)
		}
	}
	if err := sign(server, caCert, caKey, p.ServerCert, p.ServerKey); err != nil {
		return nil, err
	}
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "gpushare-test-client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if err := sign(client, caCert, caKey, p.ClientCert, p.ClientKey); err != nil {
		return nil, err
	}
	return p, nil
}

// ClientTLS is a client configuration that trusts the CA and, with cert, presents the client
// certificate.
func (p *PKI) ClientTLS(cert bool) (*tls.Config, error) {
	pemCA, err := os.ReadFile(p.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemCA) {
		return nil, fmt.Errorf("%s: no certificate", p.CAFile)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if cert {
		c, err := tls.LoadX509KeyPair(p.ClientCert, p.ClientKey)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}

func newCA(name string) (*ecdsa.PrivateKey, *x509.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return key, cert, err
}

func sign(tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey, certFile, keyFile string) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.SerialNumber = serial()
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
		return err
	}
	return writePEM(keyFile, "EC PRIVATE KEY", keyDER)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return big.NewInt(time.Now().UnixNano())
	}
	return n
}

func writePEM(path, kind string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600)
}
