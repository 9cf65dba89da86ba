package http

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"
	"github.com/veloq/veloq/internal/selfsigned"
	vnet "github.com/veloq/veloq/net"
)

// testCert is the certificate the package's TLS tests serve.
var testCert = selfsigned.Shared

// tlsClient is a net/http client that trusts the test certificate.
// It offers ALPN "http/1.1", as browsers do besides "h2".
func tlsClient() *nethttp.Client {
	cfg := testCert().ClientConfig("localhost")
	cfg.NextProtos = []string{"http/1.1"}
	return &nethttp.Client{
		Timeout:   10 * time.Second,
		Transport: &nethttp.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true, TLSClientConfig: cfg},
	}
}

// HTTPS through the TLS layer: fast and FromStd handlers run unchanged,
// keep-alive requests and bodies larger than a record go both ways, ALPN
// settles on http/1.1, and a FromStd handler sees Request.TLS as in
// net/http.
func TestHTTPS(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		mux := NewRouter()
		mux.HandleFunc("GET /", func(w *ResponseWriter, r *Request) { testHandler(w, r) })
		mux.HandleFunc("POST /echo", func(w *ResponseWriter, r *Request) { testHandler(w, r) })
		mux.Handle("GET /std", FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			if r.TLS == nil {
				w.WriteHeader(500)
				return
			}
			fmt.Fprintf(w, "%s %x %s", r.TLS.ServerName, r.TLS.Version, r.TLS.NegotiatedProtocol)
		})))
		s := startServer(t, b, mux, WithTLS(testCert().ServerConfig()))
		url := "https://localhost:" + strings.TrimPrefix(s.Addr().String()[strings.LastIndex(s.Addr().String(), ":"):], ":")
		cl := tlsClient()

		for range 3 { // keep-alive: one connection, several requests
			resp, err := cl.Get(url + "/")
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, "Hello, World!", string(body))
			require.Equal(t, "HTTP/1.1", resp.Proto)
			require.NotNil(t, resp.TLS)
			require.Equal(t, "http/1.1", resp.TLS.NegotiatedProtocol)
		}
		big := bytes.Repeat([]byte("0123456789abcdef"), 10000) // 160 KB: ten records
		resp, err := cl.Post(url+"/echo", "application/octet-stream", bytes.NewReader(big))
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, big, body)

		resp, err = cl.Get(url + "/std")
		require.NoError(t, err)
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "localhost 304 http/1.1", string(body))
	})
}

// Pipelined requests over TLS are answered in order, as in plaintext.
func TestHTTPSPipelined(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(func(w *ResponseWriter, r *Request) { w.Write(r.Path) }),
			WithTLS(testCert().ServerConfig()))
		c, err := tls.Dial("tcp", s.Addr().String(), testCert().ClientConfig("localhost"))
		require.NoError(t, err)
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		var burst []byte
		for i := range 100 {
			burst = fmt.Appendf(burst, "GET /%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
		}
		_, err = c.Write(burst)
		require.NoError(t, err)
		br := bufio.NewReader(c)
		for i := range 100 {
			_, body := readResponse(t, br, "GET")
			require.Equal(t, fmt.Sprintf("/%d", i), body)
		}
	})
}

// A TLS server needs a certificate: NewServer says so instead of failing
// every handshake.
func TestHTTPSNeedsCertificate(t *testing.T) {
	s, err := NewServer(HandlerFunc(testHandler), WithTLS(&tls.Config{}), WithNetOptions(vnet.WithLoops(1)))
	require.ErrorContains(t, err, "no certificate")
	require.Nil(t, s)
}

// Real clients over HTTPS: curl (OpenSSL) on TLS 1.2 and 1.3, and
// Python's ssl module. Each skips when its tool is not installed.
func TestHTTPSInterop(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithTLS(testCert().ServerConfig()))
		port := s.Addr().(*net.TCPAddr).Port
		url := fmt.Sprintf("https://localhost:%d/", port)
		dir := backendtest.TempDir(t)
		ca := filepath.Join(dir, "ca.pem")
		require.NoError(t, os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: testCert().TLS.Certificate[0]}), 0o600))
		resolve := fmt.Sprintf("localhost:%d:127.0.0.1", port)
		for _, tc := range []struct {
			name string
			cmd  []string
		}{
			{"curl-tls1.2", []string{"curl", "-sS", "--max-time", "10", "--cacert", ca, "--resolve", resolve, "--tlsv1.2", "--tls-max", "1.2", url}},
			{"curl-tls1.3", []string{"curl", "-sS", "--max-time", "10", "--cacert", ca, "--resolve", resolve, "--tlsv1.3", url}},
			{"python-ssl", []string{"python3", "-c", `
import socket, ssl, sys
ctx = ssl.create_default_context(cafile=sys.argv[1])
with socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=10) as raw:
    with ctx.wrap_socket(raw, server_hostname="localhost") as s:
        s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        data = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
print(data.split(b"\r\n\r\n", 1)[1].decode(), end="")
`, ca, fmt.Sprint(port)}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if _, err := exec.LookPath(tc.cmd[0]); err != nil {
					t.Skipf("%s is not installed", tc.cmd[0])
				}
				out, err := exec.Command(tc.cmd[0], tc.cmd[1:]...).CombinedOutput()
				require.NoError(t, err, "%s", out)
				require.Equal(t, "Hello, World!", string(out))
			})
		}
	})
}

// A truncated record and then silence, after the handshake: the plaintext
// never begins, so the connection is closed at the head timeout and
// counted, as a silent plaintext connection is.
func TestHTTPSTruncatedRecordThenSilence(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithTLS(testCert().ServerConfig()),
			WithReadHeaderTimeout(300*time.Millisecond), WithNextRequestTimeout(time.Minute))
		raw, err := net.Dial("tcp", s.Addr().String())
		require.NoError(t, err)
		defer raw.Close()
		raw.SetDeadline(time.Now().Add(10 * time.Second))
		c := tls.Client(raw, testCert().ClientConfig("localhost"))
		require.NoError(t, c.Handshake())
		// An application-data record of 100 bytes announced, 3 sent.
		_, err = raw.Write([]byte{23, 3, 3, 0, 100, 1, 2, 3})
		require.NoError(t, err)
		_, err = c.Read(make([]byte, 1))
		require.Error(t, err, "the connection must be closed, not answered")
		require.Eventually(t, func() bool { return s.Stats().Timeouts == 1 }, 5*time.Second, time.Millisecond)
	})
}

// Shutdown waits for a connection in its TLS handshake, as net/http's
// does for StateNew: the request that follows the handshake is answered
// (with Connection: close) before Shutdown returns. It returned at once
// before, and a program exiting then reset the connection (1 to 2
// requests in 10 hot upgrades under HTTPS load, TestUpgradeUnderLoad).
func TestHTTPSShutdownWaitsForHandshake(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithTLS(testCert().ServerConfig()))
		raw, err := net.DialTimeout("tcp", s.Addr().String(), 5*time.Second)
		require.NoError(t, err)
		defer raw.Close()
		raw.SetDeadline(time.Now().Add(10 * time.Second))
		require.Eventually(t, func() bool { return s.NetServer().NumConns() == 1 }, 5*time.Second, time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- s.Shutdown(ctx) }()
		require.Eventually(t, func() bool { // stopped accepting
			c, err := net.DialTimeout("tcp", s.Addr().String(), time.Second)
			if err == nil {
				c.Close()
			}
			return err != nil
		}, 5*time.Second, time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("Shutdown returned (%v) with a handshake in progress", err)
		default:
		}
		tc := tls.Client(raw, testCert().ClientConfig("localhost"))
		require.NoError(t, tc.Handshake())
		_, err = io.WriteString(tc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		require.NoError(t, err)
		resp, body := readResponse(t, bufio.NewReader(tc), "GET")
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, "Hello, World!", body)
		require.True(t, resp.Close)
		require.NoError(t, <-done)
	})
}
