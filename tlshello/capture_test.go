package tlshello_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A goHello is a ClientHello sent by crypto/tls's client, what crypto/tls's
// server made of it, and the config that sent it.
type goHello struct {
	name   string
	config *tls.Config
	raw    []byte               // the bytes the client sent first, hello and maybe more
	info   *tls.ClientHelloInfo // crypto/tls's server's view of the hello
}

// goConfigs are the client configs the real hellos come from.
func goConfigs() []struct {
	name   string
	config *tls.Config
	resume bool // capture a second hello that resumes the first session
} {
	return []struct {
		name   string
		config *tls.Config
		resume bool
	}{
		{name: "sni", config: &tls.Config{ServerName: "example.com"}},
		{name: "no-sni", config: &tls.Config{}},
		{name: "mixed-case-sni", config: &tls.Config{ServerName: "WWW.Example.COM"}},
		{name: "alpn", config: &tls.Config{ServerName: "example.com", NextProtos: []string{"h2", "http/1.1"}}},
		{name: "alpn-custom", config: &tls.Config{ServerName: "a.example", NextProtos: []string{"imap", "acme-tls/1", "x-custom/2"}}},
		{name: "tls12", config: &tls.Config{ServerName: "example.com", MaxVersion: tls.VersionTLS12, NextProtos: []string{"http/1.1"}}},
		{name: "tls12-suites", config: &tls.Config{ServerName: "example.com", MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}}},
		{name: "tls12-only-no-tickets", config: &tls.Config{ServerName: "example.com", MinVersion: tls.VersionTLS12, MaxVersion: tls.VersionTLS12, SessionTicketsDisabled: true}},
		{name: "tls13-only", config: &tls.Config{ServerName: "example.com", MinVersion: tls.VersionTLS13}},
		{name: "tls13-no-tickets", config: &tls.Config{ServerName: "example.com", SessionTicketsDisabled: true}},
		{name: "mlkem", config: &tls.Config{ServerName: "pq.example.com", CurvePreferences: []tls.CurveID{tls.X25519MLKEM768, tls.X25519}}},
		{name: "tls12-resumed", config: &tls.Config{ServerName: "example.com", MaxVersion: tls.VersionTLS12, ClientSessionCache: tls.NewLRUClientSessionCache(1)}, resume: true},
		{name: "tls13-resumed", config: &tls.Config{ServerName: "example.com", NextProtos: []string{"h2"}, ClientSessionCache: tls.NewLRUClientSessionCache(1)}, resume: true},
	}
}

var (
	captureOnce sync.Once
	captured    []goHello
	captureErr  error
)

// goHellos returns the ClientHellos of goConfigs, captured once per test
// binary from handshakes between crypto/tls's client and server.
func goHellos(tb testing.TB) []goHello {
	tb.Helper()
	captureOnce.Do(func() {
		cert, err := selfSigned()
		if err != nil {
			captureErr = err
			return
		}
		for _, c := range goConfigs() {
			c.config.InsecureSkipVerify = true
			h, err := handshake(c.config, cert)
			if err == nil && c.resume {
				h, err = handshake(c.config, cert)
				if err == nil && !h.resumed {
					err = io.ErrUnexpectedEOF
				}
			}
			if err != nil {
				captureErr = err
				return
			}
			captured = append(captured, goHello{name: c.name, config: c.config, raw: h.raw, info: h.info})
		}
	})
	require.NoError(tb, captureErr)
	return captured
}

type handshakeResult struct {
	raw     []byte
	info    *tls.ClientHelloInfo
	resumed bool
}

// handshake runs a TLS handshake over a TCP connection on 127.0.0.1 and
// returns what the client sent before the server's first reply was read,
// and the server's view of the ClientHello. The client reads one byte of
// application data, so it processes any session ticket the server sends
// after the handshake. (Over net.Pipe, which has no buffer, a TLS 1.3
// server sending its tickets and a client sending its Finished would block
// each other.)
func handshake(client *tls.Config, cert tls.Certificate) (handshakeResult, error) {
	c, s, err := tcpPair()
	if err != nil {
		return handshakeResult{}, err
	}
	defer c.Close()
	defer s.Close()
	rec := &recorder{Conn: s}
	var info *tls.ClientHelloInfo
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		GetConfigForClient: func(chi *tls.ClientHelloInfo) (*tls.Config, error) {
			info = chi
			return nil, nil
		},
	}
	// A fixed key, so a session of one server resumes with the next.
	cfg.SetSessionTicketKeys([][32]byte{{1}})
	server := tls.Server(rec, cfg)
	_ = s.SetDeadline(time.Now().Add(10 * time.Second))
	errc := make(chan error, 1)
	go func() {
		if err := server.Handshake(); err != nil {
			errc <- err
			return
		}
		_, err := server.Write([]byte{'x'})
		errc <- err
	}()
	cl := tls.Client(c, client)
	_ = cl.SetDeadline(time.Now().Add(10 * time.Second))
	var one [1]byte
	_, err = io.ReadFull(cl, one[:])
	if err != nil {
		c.Close() // so that a server still writing sees the client go
	}
	if serr := <-errc; err == nil {
		err = serr
	}
	if err != nil {
		return handshakeResult{}, err
	}
	return handshakeResult{raw: rec.bytes(), info: info, resumed: cl.ConnectionState().DidResume}, nil
}

// tcpPair returns the two ends of a TCP connection on 127.0.0.1.
func tcpPair() (client, server net.Conn, err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, err
	}
	defer ln.Close()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return nil, nil, err
	}
	server, err = ln.Accept()
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return client, server, nil
}

// A recorder keeps the bytes read through a connection.
type recorder struct {
	net.Conn
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.mu.Lock()
	r.buf.Write(p[:n])
	r.mu.Unlock()
	return n, err
}

func (r *recorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return bytes.Clone(r.buf.Bytes())
}

func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "example.com"},
		DNSNames:     []string{"example.com"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

// openSSLHello runs openssl s_client against a listener on 127.0.0.1 and
// returns the first bytes it sends, up to the end of its ClientHello's
// records.
func openSSLHello(t *testing.T, args ...string) []byte {
	t.Helper()
	path, err := exec.LookPath("openssl")
	if err != nil {
		t.Skip("openssl is not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append([]string{"s_client", "-connect", ln.Addr().String()}, args...)...)
	cmd.Stdin = bytes.NewReader(nil)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	defer func() {
		cancel()
		_ = cmd.Wait()
	}()

	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			done <- result{err: err}
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		b, err := readRecords(conn)
		done <- result{b, err}
	}()
	r := <-done
	if r.err != nil {
		cancel()
		_ = cmd.Wait() // after which out is openssl's no more
		t.Fatalf("reading openssl's hello: %v; openssl said: %s", r.err, out.String())
	}
	return r.b
}

// readRecords reads TLS records from r until they hold a whole handshake
// message, using only the record and handshake headers, so the capture does
// not depend on the parser under test.
func readRecords(r io.Reader) ([]byte, error) {
	var b, msg []byte
	for {
		var hdr [5]byte
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, err
		}
		frag := make([]byte, int(hdr[3])<<8|int(hdr[4]))
		if _, err := io.ReadFull(r, frag); err != nil {
			return nil, err
		}
		b = append(append(b, hdr[:]...), frag...)
		msg = append(msg, frag...)
		if len(msg) >= 4 && len(msg) >= 4+(int(msg[1])<<16|int(msg[2])<<8|int(msg[3])) {
			return b, nil
		}
	}
}
