package client

import (
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// slowHasher is an upstream handler that reads the request body slowly
// (a pause every 512 KiB) and answers its length and SHA-256.
func slowHasher(w http.ResponseWriter, r *http.Request) {
	h := sha256.New()
	buf := make([]byte, 32<<10)
	var n int64
	for {
		k, err := r.Body.Read(buf)
		h.Write(buf[:k])
		if (n+int64(k))/(512<<10) != n/(512<<10) {
			time.Sleep(time.Millisecond)
		}
		n += int64(k)
		if err == io.EOF {
			break
		}
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
	}
	fmt.Fprintf(w, "%d %x", n, h.Sum(nil))
}

// producer writes body to call in 16 KiB parts on the loop, waiting in
// WhenBodyWritable while more than 256 KiB is buffered, and records the
// most it saw buffered.
type producer struct {
	call   *Call
	body   []byte
	off    int
	most   atomic.Int64
	onWake func(error)
}

func (p *producer) run() {
	for p.off < len(p.body) {
		if b := p.call.BodyBuffered(); b > 256<<10 {
			if int64(b) > p.most.Load() {
				p.most.Store(int64(b))
			}
			p.call.WhenBodyWritable(p.onWake)
			return
		}
		n := min(16<<10, len(p.body)-p.off)
		if err := p.call.WriteBody(p.body[p.off : p.off+n]); err != nil {
			return
		}
		p.off += n
	}
	_ = p.call.EndBody()
}

func sendStreamed(t *testing.T, c *Client, l *vnet.Loop, req *Request, body []byte) (*recorder, *producer) {
	r := &recorder{}
	p := &producer{body: body}
	p.onWake = func(err error) {
		if err == nil {
			p.run()
		}
	}
	require.NoError(t, l.Post(func() {
		p.call = c.Send(l, req, r)
		p.run()
	}))
	require.Eventually(t, r.done, 20*time.Second, time.Millisecond)
	return r, p
}

// TestStreamBodyUpload sends bodies produced in parts to a slow upstream,
// with Content-Length, chunked and over HTTP/2: they arrive intact, and
// the producer, paced by WhenBodyWritable, never has more than a bounded
// amount buffered whatever the body's size.
func TestStreamBodyUpload(t *testing.T) {
	body := make([]byte, 16<<20)
	_, _ = rand.Read(body)
	want := fmt.Sprintf("%d %x", len(body), sha256.Sum256(body))
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		l := newLoop(t, b)
		c := newClient(t, l)
		h1 := addrOf(stdUpstream(t, slowHasher))
		h2, _ := h2cServer(t, slowHasher, 0)
		for _, tc := range []struct {
			name  string
			addr  string
			proto Proto
			cl    int64
		}{
			{"length", h1, ProtoHTTP1, int64(len(body))},
			{"chunked", h1, ProtoHTTP1, -1},
			{"h2", h2, ProtoHTTP2, int64(len(body))},
			{"h2-unknown", h2, ProtoHTTP2, -1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				req := &Request{Method: "POST", Addr: tc.addr, Target: "/up", Proto: tc.proto, StreamBody: true, ContentLength: tc.cl}
				r, p := sendStreamed(t, c, l, req, body)
				require.NoError(t, r.err)
				require.Equal(t, 200, r.status, r.body.String())
				require.Equal(t, want, r.body.String())
				// The producer's writes and the connection's high-water
				// mark (256 KiB) plus a part, or the windows' worth.
				require.Less(t, p.most.Load(), int64(2<<20), "buffered bytes not bounded")
			})
		}
	})
}

// TestStreamBodyWrongLength: parts past the announced length are refused,
// and a body ended short fails the call.
func TestStreamBodyWrongLength(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		l := newLoop(t, b)
		c := newClient(t, l)
		addr := addrOf(stdUpstream(t, slowHasher))
		r := &recorder{}
		errs := make(chan [3]error, 1)
		require.NoError(t, l.Post(func() {
			call := c.Send(l, &Request{Method: "PUT", Addr: addr, Target: "/", StreamBody: true, ContentLength: 5}, r)
			e1 := call.WriteBody([]byte("abcdef"))
			e2 := call.WriteBody([]byte("abc"))
			e3 := call.EndBody()
			errs <- [3]error{e1, e2, e3}
		}))
		got := <-errs
		require.ErrorIs(t, got[0], ErrBodyLength)
		require.NoError(t, got[1])
		require.ErrorIs(t, got[2], ErrBodyLength)
		require.Eventually(t, r.done, 10*time.Second, time.Millisecond)
		require.ErrorIs(t, r.err, ErrBodyLength)
	})
}

// TestWhenConnected: a streamed body written from WhenConnected's
// function goes out whole, over HTTP/1 and h2c (whose stream opens with
// the connect, before it is established); to an address that refuses
// the connect, the function is never called and the call ends with
// ErrDial, nothing of the body written.
func TestWhenConnected(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	ln.Close()
	body := []byte("hello, upstream")
	want := fmt.Sprintf("%d %x", len(body), sha256.Sum256(body))
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		l := newLoop(t, b)
		c := newClient(t, l)
		h1 := addrOf(stdUpstream(t, slowHasher))
		h2, _ := h2cServer(t, slowHasher, 0)
		for _, tc := range []struct {
			name  string
			addr  string
			proto Proto
		}{{"h1", h1, ProtoHTTP1}, {"h2c", h2, ProtoHTTP2}, {"h1-refused", dead, ProtoHTTP1}, {"h2c-refused", dead, ProtoHTTP2}} {
			t.Run(tc.name, func(t *testing.T) {
				// Twice: on a new connection, then on the pooled one.
				for range 2 {
					r := &recorder{}
					var calls atomic.Int32
					require.NoError(t, l.Post(func() {
						call := c.Send(l, &Request{Method: "POST", Addr: tc.addr, Target: "/", Proto: tc.proto, StreamBody: true, ContentLength: -1}, r)
						call.WhenConnected(func() {
							calls.Add(1)
							require.True(t, call.connected())
							_ = call.WriteBody(body)
							_ = call.EndBody()
						})
					}))
					require.Eventually(t, r.done, 10*time.Second, time.Millisecond)
					if tc.addr == dead {
						require.ErrorIs(t, r.err, ErrDial)
						require.Zero(t, calls.Load())
						continue
					}
					require.NoError(t, r.err)
					require.Equal(t, want, r.body.String())
					require.Equal(t, int32(1), calls.Load())
				}
			})
		}
	})
}
