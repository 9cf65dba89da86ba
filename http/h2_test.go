package http

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/executor"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// h2Client is Go's own HTTP/2 client: over TLS (ALPN h2) when tlsCfg is
// set, else h2c with prior knowledge. It keeps one connection per host.
func h2Client(tlsCfg *tls.Config) *nethttp.Client {
	tr := &nethttp.Transport{DisableCompression: true, TLSClientConfig: tlsCfg}
	var p nethttp.Protocols
	if tlsCfg != nil {
		p.SetHTTP2(true)
	} else {
		p.SetUnencryptedHTTP2(true)
	}
	tr.Protocols = &p
	return &nethttp.Client{Timeout: 20 * time.Second, Transport: tr}
}

// h2Handlers are the handler styles a stream serves, each answering GET /
// with "Hello, World!" and POST /echo with the body.
func h2Handlers(t *testing.T) map[string]Handler {
	pool := executor.NewPool(executor.WithWorkers(2))
	t.Cleanup(func() { _ = pool.Shutdown(context.Background()) })
	fast := HandlerFunc(testHandler)
	std := FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		if r.ProtoMajor != 2 {
			w.WriteHeader(505)
			return
		}
		if r.URL.Path == "/echo" {
			_, _ = io.Copy(w, r.Body)
			return
		}
		_, _ = io.WriteString(w, "Hello, World!")
	}))
	return map[string]Handler{"fast": fast, "std": std, "offloaded": Offloaded(pool, fast)}
}

// Go's client over h2c and h2, against every handler style: responses
// arrive whole, bodies larger than the flow-control windows go both ways,
// and 64 concurrent requests share one connection.
func TestHTTP2GoClient(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		for name, h := range h2Handlers(t) {
			for _, secure := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/tls=%v", name, secure), func(t *testing.T) {
					var opts []Option
					var cfg *tls.Config
					scheme := "http"
					if secure {
						opts = append(opts, WithTLS(testCert().ServerConfig()))
						cfg = testCert().ClientConfig("localhost")
						scheme = "https"
					}
					s := startServer(t, b, h, append(opts, WithNetOptions(vnet.WithLoops(1)))...)
					url := scheme + "://localhost:" + portOf(s.Addr())
					cl := h2Client(cfg)
					defer cl.CloseIdleConnections()

					resp, err := cl.Get(url + "/")
					require.NoError(t, err)
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					require.Equal(t, 2, resp.ProtoMajor)
					require.Equal(t, "Hello, World!", string(body))

					big := make([]byte, 1<<20) // 16 stream windows
					_, _ = rand.Read(big)
					resp, err = cl.Post(url+"/echo", "application/octet-stream", bytes.NewReader(big))
					require.NoError(t, err)
					body, _ = io.ReadAll(resp.Body)
					resp.Body.Close()
					require.Equal(t, 200, resp.StatusCode)
					require.True(t, bytes.Equal(big, body), "echoed %d bytes of %d", len(body), len(big))

					var wg sync.WaitGroup
					errs := make(chan error, 64)
					for i := range 64 {
						wg.Add(1)
						go func() {
							defer wg.Done()
							msg := strings.Repeat(fmt.Sprint(i), 1000+i)
							resp, err := cl.Post(url+"/echo", "text/plain", strings.NewReader(msg))
							if err != nil {
								errs <- err
								return
							}
							got, _ := io.ReadAll(resp.Body)
							resp.Body.Close()
							if string(got) != msg {
								errs <- fmt.Errorf("stream %d: got %d bytes, want %d", i, len(got), len(msg))
							}
						}()
					}
					wg.Wait()
					close(errs)
					for err := range errs {
						require.NoError(t, err)
					}
					st := s.Stats()
					require.Equal(t, uint64(1), st.Accepted, "every request on one connection (calm %d, resets %d, refused %d, proto errors %d)",
						st.HTTP2Calm, st.HTTP2Resets, st.HTTP2Refused, st.ProtoErrors)
					require.Equal(t, uint64(1), st.HTTP2Conns)
					require.Equal(t, uint64(66), st.HTTP2Streams)
					require.Eventually(t, func() bool { return s.Stats().Requests == 66 }, 5*time.Second, time.Millisecond,
						"every stream's answer counts as a request served")
				})
			}
		}
	})
}

func portOf(a net.Addr) string {
	return a.(*net.TCPAddr).AddrPort().String()[strings.LastIndex(a.String(), ":")+1:]
}

// A FromStd handler streams over HTTP/2 as over HTTP/1: Flush sends what
// was written, the request body is read while the answer goes out (full
// duplex, as gRPC streams need), and trailers arrive after the body.
func TestHTTP2StdStreamingAndTrailers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		h := FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			w.Header().Set("Trailer", "X-Sum")
			w.WriteHeader(200)
			w.(nethttp.Flusher).Flush()
			buf := make([]byte, 1)
			n := 0
			for {
				_, err := io.ReadFull(r.Body, buf)
				if err != nil {
					break
				}
				n++
				fmt.Fprintf(w, "got %c\n", buf[0]) // one line per byte read
				w.(nethttp.Flusher).Flush()
			}
			w.Header().Set("X-Sum", fmt.Sprint(n))
			w.Header().Set(nethttp.TrailerPrefix+"X-Late", "yes")
		}))
		s := startServer(t, b, h, WithNetOptions(vnet.WithLoops(1)))
		cl := h2Client(nil)
		defer cl.CloseIdleConnections()
		pr, pw := io.Pipe()
		req, _ := nethttp.NewRequest("POST", "http://127.0.0.1:"+portOf(s.Addr())+"/", pr)
		respc := make(chan *nethttp.Response, 1)
		go func() {
			resp, err := cl.Do(req)
			if err != nil {
				pr.CloseWithError(err)
				close(respc)
				return
			}
			respc <- resp
		}()
		// Each byte sent is answered before the next is: the handler
		// reads and writes at once.
		_, err := pw.Write([]byte("a"))
		require.NoError(t, err)
		resp := <-respc
		require.NotNil(t, resp)
		defer resp.Body.Close()
		line := make([]byte, 6)
		_, err = io.ReadFull(resp.Body, line)
		require.NoError(t, err)
		require.Equal(t, "got a\n", string(line))
		_, err = pw.Write([]byte("b"))
		require.NoError(t, err)
		_, err = io.ReadFull(resp.Body, line)
		require.NoError(t, err)
		require.Equal(t, "got b\n", string(line))
		require.NoError(t, pw.Close())
		rest, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Empty(t, rest)
		require.Equal(t, "2", resp.Trailer.Get("X-Sum"))
		require.Equal(t, "yes", resp.Trailer.Get("X-Late"))
	})
}

// WithHTTP2(false): ALPN offers only http/1.1, and a plaintext HTTP/2
// preface is not taken for HTTP/2.
func TestHTTP2Off(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithTLS(testCert().ServerConfig()), WithHTTP2(false))
		cfg := testCert().ClientConfig("localhost")
		cfg.NextProtos = []string{"h2", "http/1.1"}
		c, err := tls.Dial("tcp", s.Addr().String(), cfg)
		require.NoError(t, err)
		require.Equal(t, "http/1.1", c.ConnectionState().NegotiatedProtocol)
		c.Close()

		s2 := startServer(t, b, HandlerFunc(testHandler), WithHTTP2(false))
		conn, err := net.Dial("tcp", s2.Addr().String())
		require.NoError(t, err)
		defer conn.Close()
		_, err = conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"))
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
		got, _ := io.ReadAll(conn)
		require.True(t, strings.HasPrefix(string(got), "HTTP/1.1 "), "answered %q", got)
		require.Zero(t, s2.Stats().HTTP2Conns)
	})
}

// Shutdown sends GOAWAY to an HTTP/2 connection, lets its streams in
// progress finish, and closes it.
func TestHTTP2ShutdownGoAway(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		release := make(chan struct{})
		started := make(chan struct{}, 1)
		h := FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			started <- struct{}{}
			<-release
			_, _ = io.WriteString(w, "late")
		}))
		s := newServer(t, h, WithNetOptions(vnet.WithBackend(b)), WithNetOptions(vnet.WithLoops(1)), WithLogger(testLogger(t)))
		_, err := s.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		cl := h2Client(nil)
		defer cl.CloseIdleConnections()
		type result struct {
			body string
			err  error
		}
		done := make(chan result, 1)
		go func() {
			resp, err := cl.Get("http://127.0.0.1:" + portOf(s.Addr()) + "/")
			if err != nil {
				done <- result{err: err}
				return
			}
			body, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			done <- result{string(body), err}
		}()
		<-started
		shut := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			shut <- s.Shutdown(ctx)
		}()
		require.Eventually(t, func() bool { return s.shutting.Load() }, 5*time.Second, time.Millisecond)
		close(release)
		r := <-done
		require.NoError(t, r.err)
		require.Equal(t, "late", r.body)
		require.NoError(t, <-shut)
	})
}

// Files over HTTP/2: the body is copied into DATA frames in chunks read
// off the loop (a frame header comes before each, so the file cannot go
// to the socket as it is), whole or by range, paced by the windows.
func TestHTTP2FileServer(t *testing.T) {
	dir := backendtest.TempDir(t)
	data := make([]byte, 3<<20+123)
	_, _ = rand.Read(data)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "big.bin"), data, 0o644))
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, FileServer(dir), WithNetOptions(vnet.WithLoops(1)))
		cl := h2Client(nil)
		defer cl.CloseIdleConnections()
		url := "http://127.0.0.1:" + portOf(s.Addr()) + "/big.bin"
		resp, err := cl.Get(url)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, 2, resp.ProtoMajor)
		require.True(t, bytes.Equal(data, body), "got %d bytes of %d", len(body), len(data))

		req, _ := nethttp.NewRequest("GET", url, nil)
		req.Header.Set("Range", "bytes=1000-200999")
		resp, err = cl.Do(req)
		require.NoError(t, err)
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 206, resp.StatusCode)
		require.Equal(t, data[1000:201000], body)
	})
}
