package selfsigned

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/x509"
	"testing"
	"time"
)

// The certificate verifies for every loopback name against itself, and its
// key is P-256 (the same kind echo-server -tls-self-signed signs with).
func TestNew(t *testing.T) {
	c, err := New(time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	k, ok := c.PrivateKey.(*ecdsa.PrivateKey)
	if !ok || k.Curve != elliptic.P256() {
		t.Fatalf("key %T, want ECDSA P-256", c.PrivateKey)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.Leaf)
	for _, h := range Hosts {
		if _, err := c.Leaf.Verify(x509.VerifyOptions{DNSName: h, Roots: pool}); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
}
