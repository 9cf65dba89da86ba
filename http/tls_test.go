package http

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	nethttp "net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/selfsigned"
	"github.com/veloq/veloq/reactor"
)

var testCert = sync.OnceValue(func() *selfsigned.Cert {
	c, err := selfsigned.New(24 * time.Hour)
	if err != nil {
		panic(err)
	}
	return c
})

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
	forEachBackend(t, func(t *testing.T, b reactor.Backend) {
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
	forEachBackend(t, func(t *testing.T, b reactor.Backend) {
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
	s := NewServer(HandlerFunc(testHandler), WithTLS(&tls.Config{}), WithLoops(1))
	_, err := s.Listen("tcp", "127.0.0.1:0")
	require.ErrorContains(t, err, "no certificate")
}
