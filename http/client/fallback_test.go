package client

import (
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// TestStreamBodyTLSFallback: an HTTP/2 call over TLS whose upstream
// picks http/1.1 by ALPN falls back to HTTP/1.1 with the streamed body
// parts it had already collected (written before the connection was up,
// framed for HTTP/2): they are framed again for HTTP/1.1 (reframe), with
// Content-Length or chunked, the body ended before the connect or after
// it, and a chunked body's trailer goes in its trailer section.
func TestStreamBodyTLSFallback(t *testing.T) {
	body := make([]byte, 300<<10)
	for i := range body {
		body[i] = byte(i * 7)
	}
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		fmt.Fprintf(w, "%s %v %d %x %s", r.Proto, r.TransferEncoding, len(b), sha256.Sum256(b), r.Trailer.Get("X-Sum"))
	}))
	up.StartTLS() // ALPN offers http/1.1 only (EnableHTTP2 is off)
	t.Cleanup(up.Close)
	roots := up.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	addr := up.Listener.Addr().String()
	sum := fmt.Sprintf("%d %x", len(body), sha256.Sum256(body))
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		l := newLoop(t, b)
		for _, tc := range []struct {
			name      string
			cl        int64
			endBefore bool // the whole body, end included, before the connect
			want      string
		}{
			{"length-ended", int64(len(body)), true, "HTTP/1.1 [] " + sum + " "},
			{"length-open", int64(len(body)), false, "HTTP/1.1 [] " + sum + " "},
			{"chunked-ended", -1, true, "HTTP/1.1 [chunked] " + sum + " s1"},
			{"chunked-open", -1, false, "HTTP/1.1 [chunked] " + sum + " s1"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				// A client of its own: once fallen back, a client sends
				// the upstream's later calls over HTTP/1.1 from the start.
				c := newClient(t, l, WithTLSConfig(&tls.Config{RootCAs: roots, ServerName: "example.com"}))
				r := &recorder{}
				errs := make(chan error, 32) // the loop's checks, made here
				trailer := []Field{{Name: []byte("X-Sum"), Value: []byte("s1")}}
				require.NoError(t, l.Post(func() {
					call := c.Send(l, &Request{Method: "POST", Addr: addr, TLS: true, Host: "example.com", Target: "/up",
						Proto: ProtoHTTP2, StreamBody: true, ContentLength: tc.cl}, r)
					half := len(body) / 2
					for off := 0; off < half; off += 16 << 10 {
						errs <- call.WriteBody(body[off:min(off+16<<10, half)])
					}
					if call.connected() {
						errs <- fmt.Errorf("the parts must be written before the connection is up")
					}
					rest := func() {
						errs <- call.WriteBody(body[half:])
						errs <- call.EndBodyTrailer(trailer)
					}
					if tc.endBefore {
						rest()
						return
					}
					call.WhenConnected(rest)
				}))
				require.Eventually(t, r.done, 10*time.Second, time.Millisecond)
				close(errs)
				for err := range errs {
					require.NoError(t, err)
				}
				require.NoError(t, r.err)
				require.Equal(t, 200, r.status, r.body.String())
				require.Equal(t, tc.want, r.body.String())
			})
		}
	})
}
