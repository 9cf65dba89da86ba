// Package selfsigned makes the throwaway certificate the bench peers serve
// TLS with (-tls-self-signed): ECDSA P-256, like cmd/echo-server's, so that
// every Go server in a TLS benchmark signs its handshakes with the same
// kind of key. veloq's own internal/selfsigned cannot be imported from this
// module (Go's internal rule), hence this small twin.
//
// The certificate is its own issuer and nothing trusts it: the load
// generators skip verification, which is only acceptable because they
// talk to 127.0.0.1 alone.
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
	"sync/atomic"
	"time"
)

// Hosts the certificate names: the loopback addresses and localhost,
// the only places the benchmarks connect to.
var Hosts = []string{"localhost", "127.0.0.1", "::1"}

// New returns a certificate for Hosts, valid from an hour ago (clock skew
// between the processes does not matter on one machine, but costs
// nothing) for validFor.
func New(validFor time.Duration) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("selfsigned: key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("selfsigned: serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: Hosts[0], Organization: []string{"veloq bench self-signed"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(validFor),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	for _, h := range Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("selfsigned: certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("selfsigned: parse: %w", err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
}

// Handshakes counts a server's completed TLS handshakes, full and resumed,
// so a benchmark can check what its load really made.
type Handshakes struct{ Full, Resumed atomic.Int64 }

// Config serves cert and counts every completed handshake in h. The count
// is taken in VerifyConnection, called once per completed handshake,
// resumed or not: off the data path.
func (h *Handshakes) Config(cert tls.Certificate) *tls.Config {
	return &tls.Config{
		Certificates: []tls.Certificate{cert},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if cs.DidResume {
				h.Resumed.Add(1)
			} else {
				h.Full.Add(1)
			}
			return nil
		},
	}
}
