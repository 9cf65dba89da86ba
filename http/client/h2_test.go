package client

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2"

	"github.com/veloq/veloq/http/internal/upstreamtest"
	vnet "github.com/veloq/veloq/net"
)

// h2cServer serves h over h2c (prior knowledge) with net/http on
// 127.0.0.1, allowing maxStreams streams per connection (0: its
// default), and counts the connections it accepted.
func h2cServer(t testing.TB, h http.HandlerFunc, maxStreams int) (addr string, conns *atomic.Int32) {
	t.Helper()
	conns = new(atomic.Int32)
	s := httptest.NewUnstartedServer(h)
	s.Config.Protocols = new(http.Protocols)
	s.Config.Protocols.SetUnencryptedHTTP2(true)
	s.Config.HTTP2 = &http.HTTP2Config{MaxConcurrentStreams: maxStreams}
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return addrOf(s), conns
}

func h2req(addr, target string) *Request {
	return &Request{Method: "GET", Addr: addr, Target: target, Proto: ProtoHTTP2}
}

func TestH2Multiplexed(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr, conns := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			w.Header().Set("X-Proto", r.Proto)
			fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.Path, body)
		}, 0)
		l := newLoop(t, b)
		c := newClient(t, l)
		const n = 50
		recs := make([]*recorder, n)
		for i := range recs {
			recs[i] = &recorder{}
		}
		require.NoError(t, l.Post(func() {
			for i := range recs {
				req := h2req(addr, fmt.Sprintf("/r%d", i))
				if i%2 == 1 {
					req.Method, req.Body = "POST", []byte(strings.Repeat("b", 100_000))
				}
				c.Send(l, req, recs[i])
			}
		}))
		for i, r := range recs {
			require.Eventually(t, r.done, 10*time.Second, time.Millisecond)
			require.NoError(t, r.err)
			require.Equal(t, 200, r.status)
			require.Equal(t, "HTTP/2.0", r.fields["X-Proto"])
			want := fmt.Sprintf("GET /r%d ", i)
			if i%2 == 1 {
				want = fmt.Sprintf("POST /r%d %s", i, strings.Repeat("b", 100_000))
			}
			require.Equal(t, want, r.body.String())
		}
		require.EqualValues(t, 1, conns.Load(), "all streams over one connection")
		require.EqualValues(t, 1, upOf(c).NewConns)
	})
}

func TestH2Trailers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr, _ := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", "Grpc-Status")
			io.WriteString(w, "payload")
			w.Header().Set("Grpc-Status", "7")
		}, 0)
		l := newLoop(t, b)
		c := newClient(t, l)
		r := send(t, c, l, h2req(addr, "/"))
		require.NoError(t, r.err)
		require.Equal(t, "payload", r.body.String())
		require.Equal(t, "7", r.trailer["Grpc-Status"])
	})
}

// A paused call stops its upstream: the stream's window is not refilled,
// so the server's writes block; Resume delivers the rest.
func TestH2PauseStopsUpstream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		const total = 8 << 20
		var written atomic.Int64
		addr, _ := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
			chunk := make([]byte, 16<<10)
			for written.Load() < total {
				if _, err := w.Write(chunk); err != nil {
					return
				}
				written.Add(int64(len(chunk)))
			}
		}, 0)
		l := newLoop(t, b)
		c := newClient(t, l)
		var got atomic.Int64
		var call *Call
		r := &recorder{onBody: func(cl *Call, p []byte) {
			got.Add(int64(len(p)))
			cl.Pause()
		}}
		require.NoError(t, l.Post(func() { call = c.Send(l, h2req(addr, "/big"), r) }))
		require.Eventually(t, func() bool { return got.Load() > 0 }, 10*time.Second, time.Millisecond)
		// The server may run ahead by the stream window plus its own
		// buffers, never by megabytes.
		require.Never(t, func() bool { return written.Load() > 2<<20 }, 300*time.Millisecond, 10*time.Millisecond)
		r.onBody = func(cl *Call, p []byte) { got.Add(int64(len(p))) }
		require.NoError(t, l.Post(func() { call.Resume() }))
		require.Eventually(t, r.done, 20*time.Second, time.Millisecond)
		require.NoError(t, r.err)
		require.EqualValues(t, total, r.body.Len())
	})
}

// Cancel resets the stream (the server's request context ends) and the
// connection carries the next request.
func TestH2CancelResetsStream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var canceled atomic.Bool
		addr, conns := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/hang" {
				w.WriteHeader(200)
				w.(http.Flusher).Flush()
				<-r.Context().Done()
				canceled.Store(true)
				return
			}
			io.WriteString(w, "ok")
		}, 0)
		l := newLoop(t, b)
		c := newClient(t, l)
		r := &recorder{onHead: func(call *Call, h *ResponseHead) { call.Cancel() }}
		sendWith(t, c, l, h2req(addr, "/hang"), r)
		require.ErrorIs(t, r.err, ErrCanceled)
		require.Eventually(t, canceled.Load, 10*time.Second, time.Millisecond)
		r2 := send(t, c, l, h2req(addr, "/next"))
		require.NoError(t, r2.err)
		require.Equal(t, "ok", r2.body.String())
		require.EqualValues(t, 1, conns.Load())
	})
}

func TestH2UpstreamResetsStream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr, _ := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
			io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // RST_STREAM INTERNAL_ERROR
		}, 0)
		l := newLoop(t, b)
		c := newClient(t, l)
		r := send(t, c, l, h2req(addr, "/"))
		require.ErrorIs(t, r.err, ErrStreamReset)
		require.ErrorIs(t, r.err, ErrUpstreamClosed)
		var e *Error
		require.ErrorAs(t, r.err, &e)
		require.True(t, e.ResponseStarted)
	})
}

// The server's SETTINGS_MAX_CONCURRENT_STREAMS bounds the streams; with
// one connection allowed the rest wait in the queue.
func TestH2MaxConcurrentStreams(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var inflight, peak atomic.Int32
		release := make(chan struct{})
		addr, conns := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/warm" {
				return
			}
			n := inflight.Add(1)
			for {
				p := peak.Load()
				if n <= p || peak.CompareAndSwap(p, n) {
					break
				}
			}
			<-release
			inflight.Add(-1)
		}, 2)
		l := newLoop(t, b)
		c := newClient(t, l, WithMaxConnsPerHost(1))
		// The first request learns the server's SETTINGS.
		require.NoError(t, send(t, c, l, h2req(addr, "/warm")).err)
		recs := make([]*recorder, 6)
		for i := range recs {
			recs[i] = &recorder{}
		}
		require.NoError(t, l.Post(func() {
			for i := range recs {
				c.Send(l, h2req(addr, "/"), recs[i])
			}
		}))
		require.Eventually(t, func() bool { return inflight.Load() == 2 }, 10*time.Second, time.Millisecond)
		require.Never(t, func() bool { return inflight.Load() > 2 }, 200*time.Millisecond, 5*time.Millisecond)
		close(release)
		for _, r := range recs {
			require.Eventually(t, r.done, 10*time.Second, time.Millisecond)
			require.NoError(t, r.err)
		}
		require.EqualValues(t, 2, peak.Load())
		require.EqualValues(t, 1, conns.Load())
	})
}

// GOAWAY: streams above its last stream id are retried on a new
// connection; the old one takes no new streams.
func TestH2GoAwayRetries(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var mu sync.Mutex
		seen := 0
		addr := upstreamtest.RawH2(t, func(fr *http2.Framer, enc func(...string) []byte, id uint32, conn int) {
			mu.Lock()
			seen++
			first := conn == 0 && seen == 2
			mu.Unlock()
			if first {
				// Two streams arrived on the first connection: only the
				// first is processed.
				_ = fr.WriteGoAway(1, http2.ErrCodeNo, nil)
				_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(":status", "200"), EndHeaders: true})
				_ = fr.WriteData(1, true, []byte("one"))
				return
			}
			if conn == 0 {
				return
			}
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: enc(":status", "200"), EndHeaders: true})
			_ = fr.WriteData(id, true, []byte(fmt.Sprintf("conn%d", conn)))
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		r1, r2 := &recorder{}, &recorder{}
		require.NoError(t, l.Post(func() {
			c.Send(l, h2req(addr, "/1"), r1)
			req := h2req(addr, "/2")
			req.Method, req.Body = "POST", []byte("x") // not idempotent: GOAWAY says unprocessed
			c.Send(l, req, r2)
		}))
		require.Eventually(t, func() bool { return r1.done() && r2.done() }, 10*time.Second, time.Millisecond)
		require.NoError(t, r1.err)
		require.Equal(t, "one", r1.body.String())
		require.NoError(t, r2.err)
		require.Equal(t, "conn1", r2.body.String())
		require.EqualValues(t, 2, upOf(c).NewConns)
	})
}

// The server's PING is answered.
func TestH2PingAnswered(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		acked := make(chan [8]byte, 1)
		addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
			preface := make([]byte, len(http2.ClientPreface))
			if _, err := io.ReadFull(br, preface); err != nil {
				return
			}
			fr := http2.NewFramer(c, br)
			_ = fr.WriteSettings()
			_ = fr.WritePing(false, [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					return
				}
				if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
					select { // once per connection; the call is retried on new ones
					case acked <- p.Data:
					default:
					}
					_ = fr.WriteGoAway(0, http2.ErrCodeNo, nil)
					return
				}
			}
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		r := &recorder{}
		require.NoError(t, l.Post(func() { c.Send(l, h2req(addr, "/"), r) }))
		select {
		case d := <-acked:
			require.Equal(t, [8]byte{1, 2, 3, 4, 5, 6, 7, 8}, d)
		case <-time.After(10 * time.Second):
			t.Fatal("no PING ack")
		}
		require.Eventually(t, r.done, 10*time.Second, time.Millisecond)
	})
}

// h2 over TLS by ALPN, and HTTP/1.1 when the server does not pick h2.
func TestH2OverTLS(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		for _, enable := range []bool{true, false} {
			s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, r.Proto)
			}))
			s.EnableHTTP2 = enable
			s.StartTLS()
			t.Cleanup(s.Close)
			l := newLoop(t, b)
			c := newClient(t, l, WithTLSConfig(&tls.Config{RootCAs: s.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, ServerName: "example.com"}))
			for range 3 {
				req := h2req(addrOf(s), "/")
				req.TLS = true
				r := send(t, c, l, req)
				require.NoError(t, r.err)
				if enable {
					require.Equal(t, "HTTP/2.0", r.body.String())
				} else {
					require.Equal(t, "HTTP/1.1", r.body.String())
				}
			}
			require.EqualValues(t, 1, c.Stats().NewConns)
		}
	})
}

// A stream whose head is late fails with ErrTimeout and is reset; the
// connection serves the next request.
func TestH2ResponseHeadTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var canceled atomic.Bool
		addr, conns := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/slow" {
				<-r.Context().Done()
				canceled.Store(true)
				return
			}
			io.WriteString(w, "ok")
		}, 0)
		l := newLoop(t, b)
		c := newClient(t, l, WithResponseHeaderTimeout(100*time.Millisecond))
		r := send(t, c, l, h2req(addr, "/slow"))
		require.ErrorIs(t, r.err, ErrTimeout)
		require.Eventually(t, canceled.Load, 10*time.Second, time.Millisecond)
		r2 := send(t, c, l, h2req(addr, "/"))
		require.NoError(t, r2.err)
		require.EqualValues(t, 1, conns.Load())
	})
}

// A response head over WithMaxResponseHeaderBytes fails the call with a
// *ProtocolError; the connection goes on.
func TestH2HeaderListLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr, _ := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/big" {
				w.Header().Set("X-Big", strings.Repeat("v", 4000))
			}
			io.WriteString(w, "ok")
		}, 0)
		l := newLoop(t, b)
		c := newClient(t, l, WithMaxResponseHeaderBytes(1024))
		r := send(t, c, l, h2req(addr, "/big"))
		var pe *ProtocolError
		require.ErrorAs(t, r.err, &pe)
		r2 := send(t, c, l, h2req(addr, "/"))
		require.NoError(t, r2.err)
		require.Equal(t, "ok", r2.body.String())
	})
}

// When every connection carries the server's maximum of streams, a new
// one is dialed, up to WithMaxConnsPerHost.
func TestH2MoreConnsPastMaxStreams(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		release := make(chan struct{})
		var inflight atomic.Int32
		addr, conns := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/warm" {
				return
			}
			inflight.Add(1)
			<-release
		}, 2)
		l := newLoop(t, b)
		c := newClient(t, l, WithMaxConnsPerHost(3))
		require.NoError(t, send(t, c, l, h2req(addr, "/warm")).err)
		recs := make([]*recorder, 8)
		for i := range recs {
			recs[i] = &recorder{}
		}
		require.NoError(t, l.Post(func() {
			for _, r := range recs {
				c.Send(l, h2req(addr, "/"), r)
			}
		}))
		// The first connection learnt the limit, which the new ones
		// assume: 3 connections of 2 streams, 2 calls queued.
		require.Eventually(t, func() bool { return inflight.Load() == 6 }, 10*time.Second, time.Millisecond)
		require.Never(t, func() bool { return inflight.Load() > 6 }, 200*time.Millisecond, 5*time.Millisecond)
		require.Equal(t, 2, upOf(c).Queued)
		close(release)
		for _, r := range recs {
			require.Eventually(t, r.done, 10*time.Second, time.Millisecond)
			require.NoError(t, r.err)
		}
		require.EqualValues(t, 3, conns.Load())
	})
}

// Transport with Proto ProtoHTTP2: net/http's client over veloq's h2
// pools, trailers included.
func TestH2Transport(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr, conns := h2cServer(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Trailer", "X-Sum")
			io.Copy(w, r.Body)
			w.Header().Set("X-Sum", "42")
		}, 0)
		l := newLoop(t, b)
		c := newClient(t, l)
		hc := &http.Client{Transport: &Transport{Client: c, Proto: ProtoHTTP2}, Timeout: 10 * time.Second}
		for range 3 {
			resp, err := hc.Post("http://"+addr+"/", "text/plain", strings.NewReader("hello"))
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, "hello", string(body))
			require.Equal(t, 2, resp.ProtoMajor)
			require.Equal(t, "42", resp.Trailer.Get("X-Sum"))
		}
		require.EqualValues(t, 1, conns.Load())
	})
}

// A refused h2c upstream: the call fails with ErrDial.
func TestH2DialRefused(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		ln.Close()
		l := newLoop(t, b)
		c := newClient(t, l)
		r := send(t, c, l, h2req(addr, "/"))
		require.ErrorIs(t, r.err, ErrDial)
		require.Eventually(t, func() bool { return upOf(c).Open == 0 }, 10*time.Second, time.Millisecond)
	})
}

// REFUSED_STREAM before any response byte: the stream was not processed,
// so even a POST is retried (on the same connection, then past the
// GOAWAY on a new one).
func TestH2RefusedStreamRetried(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr := upstreamtest.RawH2(t, func(fr *http2.Framer, enc func(...string) []byte, id uint32, conn int) {
			if conn == 0 {
				_ = fr.WriteRSTStream(id, http2.ErrCodeRefusedStream)
				_ = fr.WriteGoAway(id, http2.ErrCodeNo, nil)
				return
			}
			_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: enc(":status", "201"), EndHeaders: true, EndStream: true})
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		req := h2req(addr, "/")
		req.Method, req.Body = "POST", []byte("once")
		r := send(t, c, l, req)
		require.NoError(t, r.err)
		require.Equal(t, 201, r.status)
		require.EqualValues(t, 2, upOf(c).Retries)
	})
}

// Frames that break HTTP/2 fail the calls with a *ProtocolError: a
// connection error (a header block cut by another frame) ends the
// connection, a stream error (DATA before the head) only the stream.
func TestH2MalformedUpstream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr := upstreamtest.RawH2(t, func(fr *http2.Framer, enc func(...string) []byte, id uint32, conn int) {
			switch {
			case conn == 0 && id == 1:
				_ = fr.WriteData(id, true, []byte("early"))
			case conn == 0:
				_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: enc(":status", "200")})
				_ = fr.WritePing(false, [8]byte{})
			default:
				_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: enc(":status", "204"), EndHeaders: true, EndStream: true})
			}
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		var pe *ProtocolError
		r := send(t, c, l, h2req(addr, "/"))
		require.ErrorAs(t, r.err, &pe)
		r = send(t, c, l, h2req(addr, "/"))
		require.ErrorAs(t, r.err, &pe)
		require.Contains(t, pe.Error(), "header block")
		r = send(t, c, l, h2req(addr, "/"))
		require.NoError(t, r.err)
		require.Equal(t, 204, r.status)
		require.EqualValues(t, 2, upOf(c).NewConns)
	})
}
