// Package selfsigned makes a throwaway ECDSA P-256 certificate for TLS
// tests and benchmarks (cmd/echo-server -tls-self-signed): a server
// certificate and the pool a client trusts it with.
package selfsigned

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"sync"
	"time"
)

// Cert is a self-signed certificate, its key, and a pool that trusts it.
type Cert struct {
	TLS  tls.Certificate
	Pool *x509.CertPool
	Leaf *x509.Certificate
}

// New makes a certificate valid for hosts (names or IP addresses) from an
// hour ago until validFor from now; it is its own CA. With no hosts it
// covers localhost, 127.0.0.1 and ::1.
func New(validFor time.Duration, hosts ...string) (*Cert, error) {
	now := time.Now()
	return NewAt(now.Add(-time.Hour), now.Add(validFor), hosts...)
}

// NewAt is New for a certificate valid from notBefore to notAfter (an
// expired one, for tests of the failure).
func NewAt(notBefore, notAfter time.Time, hosts ...string) (*Cert, error) {
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("selfsigned: key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, fmt.Errorf("selfsigned: serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: hosts[0], Organization: []string{"veloq self-signed"}},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("selfsigned: certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("selfsigned: parse: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &Cert{TLS: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, Pool: pool, Leaf: leaf}, nil
}

// ServerConfig is a tls.Config serving the certificate.
func (c *Cert) ServerConfig() *tls.Config {
	return &tls.Config{Certificates: []tls.Certificate{c.TLS}}
}

// ClientConfig is a tls.Config trusting the certificate, for serverName.
func (c *Cert) ClientConfig(serverName string) *tls.Config {
	return &tls.Config{RootCAs: c.Pool, ServerName: serverName}
}

// Shared returns one certificate for localhost and the loopback
// addresses, made on first use and kept for the process: the tests of
// several packages serve it, and an ECDSA key per test adds up.
var Shared = sync.OnceValue(func() *Cert {
	c, err := New(24 * time.Hour)
	if err != nil {
		panic(err) // crypto/rand failed: nothing in the process works
	}
	return c
})
