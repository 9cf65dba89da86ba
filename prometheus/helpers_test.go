package prometheus

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log/slog"
	"math/big"
	"net"
	nethttp "net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// register puts c in a registry of its own, checks that its metrics follow
// Prometheus's naming conventions, and returns the registry.
func register(t *testing.T, c prometheus.Collector) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(c))
	problems, err := testutil.CollectAndLint(c)
	require.NoError(t, err)
	require.Empty(t, problems, "naming problems")
	return reg
}

// sum gathers reg and returns the sum of name's samples over every label
// set, and how many series it has.
func sum(t *testing.T, reg prometheus.Gatherer, name string) (float64, int) {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		total := 0.0
		for _, m := range mf.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				total += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				total += m.GetGauge().GetValue()
			}
		}
		return total, len(mf.GetMetric())
	}
	t.Fatalf("%s not gathered", name)
	return 0, 0
}

// eventually waits until name's samples sum to want.
func eventually(t *testing.T, reg prometheus.Gatherer, name string, cond func(v float64) bool, what string) {
	t.Helper()
	require.Eventuallyf(t, func() bool {
		v, _ := sum(t, reg, name)
		return cond(v)
	}, 5*time.Second, 2*time.Millisecond, "%s: %s", name, what)
}

func equals(want float64) func(float64) bool { return func(v float64) bool { return v == want } }
func atLeast(want float64) func(float64) bool {
	return func(v float64) bool { return v >= want }
}

// scrape serves reg through promhttp as a real scrape target and returns
// the text exposition a Prometheus server would read.
func scrape(t *testing.T, reg *prometheus.Registry) string {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}))
	defer srv.Close()
	resp, err := nethttp.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, nethttp.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// requireLines checks that the exposition text holds every line of want.
func requireLines(t *testing.T, text string, want ...string) {
	t.Helper()
	lines := strings.Split(text, "\n")
	for _, w := range want {
		require.Contains(t, lines, w, "exposition lacks %q", w)
	}
}

// startNet serves h on 127.0.0.1 with backend b; the server is closed at
// cleanup.
func startNet(t *testing.T, b vnet.Backend, h vnet.Handler, opts ...vnet.Option) *vnet.Server {
	t.Helper()
	base := []vnet.Option{vnet.WithBackend(b), vnet.WithLogger(slog.New(slog.DiscardHandler))}
	s, err := vnet.NewServer(h, append(base, opts...)...)
	require.NoError(t, err)
	_, err = s.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	return s
}

// dial connects to addr; the connection is closed at cleanup.
func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
	return c
}

// selfSigned makes a TLS server configuration with a fresh ECDSA P-256
// certificate for 127.0.0.1.
func selfSigned(t *testing.T) *tls.Config {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "veloq prometheus test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	return &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
}
