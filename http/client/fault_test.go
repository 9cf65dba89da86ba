package client

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

const okResp = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// An upstream that closes an idle pooled connection: the loop drops it
// when the FIN arrives, and the next request goes over a new connection
// with no error and no retry.
func TestIdleUpstreamClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
			if _, err := readReq(br); err != nil {
				return
			}
			c.Write([]byte(okResp)) // keep-alive, then close
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		for i := range 3 {
			r := send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"})
			require.NoError(t, r.err)
			require.Equal(t, "ok", r.body.String())
			// The FIN reaches the loop, which drops the idle connection.
			require.Eventually(t, func() bool { u := upOf(c); return u.Open == 0 && u.Idle == 0 },
				10*time.Second, time.Millisecond, "request %d", i)
		}
		u := upOf(c)
		require.EqualValues(t, 3, u.NewConns)
		require.EqualValues(t, 0, u.ReusedConns)
		require.EqualValues(t, 0, u.Retries)
		require.EqualValues(t, 0, u.Errs)
	})
}

// A reused connection that the upstream closes after reading the request,
// before any response byte: the request is retried once on a new
// connection and the caller sees the answer.
func TestRetryOnReusedConn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
			if _, err := readReq(br); err != nil {
				return
			}
			c.Write([]byte(okResp))
			if i == 0 {
				readReq(br) // the second request: dropped unanswered
				return
			}
			for {
				if _, err := readReq(br); err != nil {
					return
				}
				c.Write([]byte(okResp))
			}
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		r := send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"})
		require.NoError(t, r.err)
		r = send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"})
		require.NoError(t, r.err)
		require.Equal(t, "ok", r.body.String())
		u := upOf(c)
		require.EqualValues(t, 1, u.Retries)
		require.EqualValues(t, 2, u.NewConns)

		// Not retried: a POST with a body.
		r = send(t, c, l, &Request{Method: "POST", Addr: addr, Target: "/", Body: []byte("x")})
		require.NoError(t, r.err)
	})
}

// A non-idempotent request with a body is not retried.
func TestNoRetryForPOST(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
			if _, err := readReq(br); err != nil {
				return
			}
			c.Write([]byte(okResp))
			readReq(br) // then drop the connection unanswered
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		require.NoError(t, send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"}).err)
		r := send(t, c, l, &Request{Method: "POST", Addr: addr, Target: "/", Body: []byte("x")})
		require.ErrorIs(t, r.err, ErrUpstreamClosed)
		var e *Error
		require.True(t, errors.As(r.err, &e))
		require.False(t, e.ResponseStarted)
		require.EqualValues(t, 0, upOf(c).Retries)
	})
}

// An upstream that resets in the middle of a body: the call ends with an
// error, never as a complete response.
func TestResetMidBody(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
			if _, err := readReq(br); err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("x", 1000)))
			c.(*net.TCPConn).SetLinger(0) // close with a reset
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		r := send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"})
		require.ErrorIs(t, r.err, ErrUpstreamClosed)
		var e *Error
		require.True(t, errors.As(r.err, &e))
		require.True(t, e.ResponseStarted)
		require.Equal(t, 200, r.status)
		require.Less(t, r.body.Len(), 100000)
		require.Eventually(t, func() bool { return upOf(c).Open == 0 }, 10*time.Second, time.Millisecond)
	})
}

// The same with a chunked body cut short by a FIN.
func TestFINMidChunkedBody(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
			if _, err := readReq(br); err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"))
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		r := send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"})
		require.ErrorIs(t, r.err, ErrUpstreamClosed)
		require.Equal(t, "hello", r.body.String())
	})
}

// An upstream that accepts and never answers: the response-head timeout.
func TestResponseHeaderTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
			readReq(br)
			br.ReadByte() // until the client gives up
		})
		l := newLoop(t, b)
		c := newClient(t, l, WithResponseHeaderTimeout(100*time.Millisecond))
		r := send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"})
		require.ErrorIs(t, r.err, ErrTimeout)
		require.Eventually(t, func() bool { return upOf(c).Open == 0 }, 10*time.Second, time.Millisecond)
		require.EqualValues(t, 1, c.Stats().Errors)
	})
}

// The head timeout of a request on a reused connection counts from that
// request, not from the timer an earlier request left pending (arm moves
// the timer only when it would fire late): the second request, sent at
// once on the same connection, times out no earlier than its own 200 ms.
func TestResponseHeaderTimeoutOnReusedConn(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
			readReq(br)
			c.Write([]byte(okResp))
			readReq(br)
			br.ReadByte() // until the client gives up
		})
		l := newLoop(t, b)
		c := newClient(t, l, WithResponseHeaderTimeout(200*time.Millisecond))
		require.NoError(t, send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"}).err)
		// Not a synchronisation: 100 ms between the two deadlines, so that
		// firing at the first one would show.
		time.Sleep(100 * time.Millisecond)
		start := time.Now()
		r := send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"})
		require.ErrorIs(t, r.err, ErrTimeout)
		require.GreaterOrEqual(t, time.Since(start), 190*time.Millisecond)
		require.EqualValues(t, 1, c.Stats().NewConns, "the second request reused the connection")
	})
}

// A refused upstream: a dial error.
func TestRefusedUpstream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := ln.Addr().String()
		ln.Close()
		l := newLoop(t, b)
		c := newClient(t, l)
		r := send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"})
		require.Error(t, r.err)
		require.ErrorIs(t, r.err, ErrDial)
		require.ErrorContains(t, r.err, "refused")
		require.Eventually(t, func() bool { return upOf(c).Open == 0 }, 10*time.Second, time.Millisecond)
	})
}

// Malformed or ambiguous responses fail with a ProtocolError and their
// connection is closed, never pooled.
func TestProtocolErrors(t *testing.T) {
	cases := map[string]string{
		"garbage":       "SSH-2.0-OpenSSH_9.0\r\n\r\n",
		"both framings": "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"two lengths":   "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
		"bare LF":       "HTTP/1.1 200 OK\nContent-Length: 2\n\nok",
		"obs-fold":      "HTTP/1.1 200 OK\r\nX: a\r\n b\r\nContent-Length: 2\r\n\r\nok",
		"bad chunk":     "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nok\r\n0\r\n\r\n",
	}
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		for name, resp := range cases {
			t.Run(strings.ReplaceAll(name, " ", "_"), func(t *testing.T) {
				addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
					if _, err := readReq(br); err != nil {
						return
					}
					c.Write([]byte(resp))
					br.ReadByte() // until the client closes
				})
				l := newLoop(t, b)
				c := newClient(t, l)
				r := send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"})
				var pe *ProtocolError
				require.True(t, errors.As(r.err, &pe), "err = %v", r.err)
				require.Eventually(t, func() bool { u := upOf(c); return u.Open == 0 && u.Idle == 0 },
					10*time.Second, time.Millisecond)
			})
		}
	})
}

// Bytes past a response's Content-Length are never read as the next
// response: the connection is closed, and the next request gets a new one.
func TestBytesPastContentLength(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		smuggled := "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged"
		addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
			for {
				if _, err := readReq(br); err != nil {
					return
				}
				if i == 0 {
					c.Write([]byte(okResp + smuggled))
				} else {
					c.Write([]byte(okResp))
				}
			}
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		r := send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"})
		require.NoError(t, r.err)
		require.Equal(t, "ok", r.body.String())
		r = send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"})
		require.NoError(t, r.err)
		require.Equal(t, "ok", r.body.String(), "the smuggled response was taken")
		require.EqualValues(t, 2, upOf(c).NewConns)
	})
}

// HEAD, 204 and 304 have no body whatever their Content-Length says; the
// connection stays in step and is reused.
func TestNoBodyResponses(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
			for {
				r, err := readReq(br)
				if err != nil {
					return
				}
				switch r.URL.Path {
				case "/head":
					c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n"))
				case "/204":
					c.Write([]byte("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n"))
				case "/304":
					c.Write([]byte("HTTP/1.1 304 Not Modified\r\nContent-Length: 5\r\n\r\n"))
				default:
					c.Write([]byte(okResp))
				}
			}
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		for _, tc := range []struct{ method, path string }{{"HEAD", "/head"}, {"GET", "/204"}, {"GET", "/304"}, {"GET", "/"}} {
			r := send(t, c, l, &Request{Method: tc.method, Addr: addr, Target: tc.path})
			require.NoError(t, r.err, tc.path)
			if tc.path == "/" {
				require.Equal(t, "ok", r.body.String())
			} else {
				require.Zero(t, r.body.Len(), tc.path)
			}
		}
		require.EqualValues(t, 1, upOf(c).NewConns)
	})
}

// Interim 100 Continue (and 103) answers are skipped.
func TestInterimResponsesSkipped(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
			if _, err := readReq(br); err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 100 Continue\r\n\r\n"))
			c.Write([]byte("HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n" + okResp))
			br.ReadByte()
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		r := send(t, c, l, &Request{Method: "POST", Addr: addr, Target: "/", Body: []byte("data")})
		require.NoError(t, r.err)
		require.Equal(t, 1, r.heads)
		require.Equal(t, []int{100, 103}, r.interim)
		require.Equal(t, 200, r.status)
		require.Equal(t, "ok", r.body.String())
	})
}

// Cancel ends the call with ErrCanceled; the connection, whose answer's
// rest never comes, is closed at the drain's bound (drain.go).
func TestCancel(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
			if _, err := readReq(br); err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab"))
			br.ReadByte()
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		r := &recorder{}
		r.onBody = func(call *Call, p []byte) { call.Cancel() }
		sendWith(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"}, r)
		require.ErrorIs(t, r.err, ErrCanceled)
		require.Eventually(t, func() bool { return upOf(c).Open == 0 }, 10*time.Second, time.Millisecond)
	})
}

// Requests with CR or LF in what becomes the head are refused.
func TestInvalidRequest(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		l := newLoop(t, b)
		c := newClient(t, l)
		for _, req := range []*Request{
			{Method: "GET", Addr: "127.0.0.1:1", Target: "/\r\nX: y"},
			{Method: "GET", Addr: "127.0.0.1:1", Target: "/", Host: "a\r\nb"},
			{Method: "GET", Addr: "127.0.0.1:1", Target: "/", Header: []Field{{[]byte("X"), []byte("a\r\nb: c")}}},
			{Method: "GET", Addr: "127.0.0.1:1", Target: "/", Header: []Field{{[]byte("X Y"), []byte("a")}}},
			// Past the first word of the value, and in the name's four-byte steps.
			{Method: "GET", Addr: "127.0.0.1:1", Target: "/", Header: []Field{{[]byte("X"), []byte("abcdefgh\nEvil: 1")}}},
			{Method: "GET", Addr: "127.0.0.1:1", Target: "/", Header: []Field{{[]byte("X"), []byte("abcdefghijklmno\r")}}},
			{Method: "GET", Addr: "127.0.0.1:1", Target: "/", Header: []Field{{[]byte("X"), []byte("abcdefghijk\x00")}}},
			{Method: "GET", Addr: "127.0.0.1:1", Target: "/", Header: []Field{{[]byte("X-Long-Name\r\nEvil"), []byte("a")}}},
			{Method: "GET", Addr: "127.0.0.1:1", Target: "/", Header: []Field{{[]byte(""), []byte("a")}}},
			{Method: "G T", Addr: "127.0.0.1:1", Target: "/"},
			{Method: "GET", Addr: "", Target: "/"},
		} {
			r := send(t, c, l, req)
			require.ErrorIs(t, r.err, ErrInvalidRequest, fmt.Sprintf("%+v", req))
		}
	})
}

// A pooled connection idle past WithIdleTimeout is closed by the loop's
// timer.
func TestIdleTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
			for {
				if _, err := readReq(br); err != nil {
					return
				}
				c.Write([]byte(okResp))
			}
		})
		l := newLoop(t, b)
		c := newClient(t, l, WithIdleTimeout(50*time.Millisecond))
		require.NoError(t, send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"}).err)
		require.Eventually(t, func() bool { u := upOf(c); return u.Open == 0 && u.Idle == 0 },
			10*time.Second, time.Millisecond)
	})
}

// Unsolicited bytes on an idle pooled connection: it is dropped, and the
// next request goes over a new connection.
func TestUnsolicitedBytesWhileIdle(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
			for n := 0; ; n++ {
				if _, err := readReq(br); err != nil {
					return
				}
				c.Write([]byte(okResp))
				if i == 0 && n == 0 {
					c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged"))
				}
			}
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		require.NoError(t, send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"}).err)
		require.Eventually(t, func() bool { return upOf(c).Open == 0 }, 10*time.Second, time.Millisecond)
		r := send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"})
		require.NoError(t, r.err)
		require.Equal(t, "ok", r.body.String())
	})
}

// A 101 response's connection is taken over with Hijack: the caller
// speaks the new protocol on it, and the pool forgets it.
func TestHijack101(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
			if _, err := readReq(br); err != nil {
				return
			}
			c.Write([]byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: echo\r\nConnection: Upgrade\r\n\r\nhi"))
			io.Copy(c, br) // echo
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		got := make(chan string, 4)
		r := &recorder{}
		r.onHead = func(call *Call, h *ResponseHead) {
			conn, err := call.Hijack()
			if err != nil {
				got <- err.Error()
				return
			}
			conn.SetHandler(&vnet.HandlerFuncs{Data: func(conn *vnet.Conn) {
				p, _ := conn.Next(-1)
				got <- string(p)
				if string(p) == "hi" {
					conn.Write([]byte("ping"))
				} else {
					conn.Close()
				}
			}})
		}
		sendWith(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/",
			Header: []Field{{[]byte("Upgrade"), []byte("echo")}, {[]byte("Connection"), []byte("Upgrade")}}}, r)
		require.NoError(t, r.err)
		require.Equal(t, 101, r.status)
		require.Equal(t, "hi", <-got)
		require.Equal(t, "ping", <-got)
		u := upOf(c)
		require.Equal(t, 0, u.Open)
		require.Equal(t, 0, u.Idle)
	})
}
