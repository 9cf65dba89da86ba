package http

import (
	"bytes"
	"io"
	"net"
	nethttp "net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/net/http2/hpack"

	"github.com/veloq/veloq/http/internal/h2"
	vnet "github.com/veloq/veloq/net"
)

// rawH2 is a hand-driven HTTP/2 client: it writes frames as given, so a
// test can send what no well-behaved client would.
type rawH2 struct {
	t    *testing.T
	c    net.Conn
	in   []byte
	enc  *hpack.Encoder
	eb   bytes.Buffer
	dec  *hpack.Decoder // the server's blocks, in order
	dead time.Time
	end  error // how the connection ended: io.EOF when the server closed gracefully
}

func dialH2(t *testing.T, addr string, settings ...h2.Setting) *rawH2 {
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	r := &rawH2{t: t, c: c, dead: time.Now().Add(10 * time.Second)}
	r.enc = hpack.NewEncoder(&r.eb)
	r.dec = hpack.NewDecoder(4096, nil)
	r.write(append([]byte(h2.ClientPreface), h2.AppendSettings(nil, settings...)...))
	return r
}

func (r *rawH2) write(b []byte) error {
	_, err := r.c.Write(b)
	return err
}

// block encodes a request's header block.
func (r *rawH2) block(method, path string, extra ...string) []byte {
	r.eb.Reset()
	for _, f := range [][2]string{{":method", method}, {":scheme", "http"}, {":path", path}, {":authority", "x"}} {
		_ = r.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for i := 0; i+1 < len(extra); i += 2 {
		_ = r.enc.WriteField(hpack.HeaderField{Name: extra[i], Value: extra[i+1]})
	}
	return bytes.Clone(r.eb.Bytes())
}

// get opens stream id with a GET for path.
func (r *rawH2) get(id uint32, path string) []byte {
	return h2.AppendHeaders(nil, id, true, r.block("GET", path), h2.MinMaxFrameSize)
}

// next returns the next frame from the server, or ok=false once the
// connection is closed.
func (r *rawH2) next() (h h2.Header, p []byte, ok bool) {
	require.NoError(r.t, r.c.SetReadDeadline(r.dead))
	for {
		h, p, n, err := h2.Next(r.in, h2.MaxMaxFrameSize)
		require.NoError(r.t, err)
		if n > 0 {
			p = bytes.Clone(p)
			r.in = r.in[n:]
			return h, p, true
		}
		buf := make([]byte, 64<<10)
		k, err := r.c.Read(buf)
		r.in = append(r.in, buf[:k]...)
		if err != nil {
			if os.IsTimeout(err) {
				r.t.Fatal("no frame from the server before the deadline (a stall)")
			}
			r.end = err
			return h2.Header{}, nil, false
		}
	}
}

// goAway reads until the server's GOAWAY and returns its code; the
// connection must close after it.
func (r *rawH2) goAway() h2.ErrCode {
	for {
		h, p, ok := r.next()
		require.True(r.t, ok, "connection closed without GOAWAY")
		if h.Type == h2.TypeGoAway {
			_, code, _, err := h2.ParseGoAway(h, p)
			require.NoError(r.t, err)
			for {
				if _, _, ok := r.next(); !ok {
					return code
				}
			}
		}
	}
}

// status reads until stream id's response HEADERS and returns :status.
func (r *rawH2) status(id uint32) int {
	for {
		h, p, ok := r.next()
		require.True(r.t, ok, "connection closed before stream %d's answer", id)
		if h.Type == h2.TypeRSTStream && h.Stream == id {
			code, _ := h2.ParseRSTStream(h, p)
			r.t.Fatalf("stream %d reset: %v", id, code)
		}
		if h.Type != h2.TypeHeaders {
			continue
		}
		block, err := h2.ParseHeaders(h, p)
		require.NoError(r.t, err)
		fields, err := r.dec.DecodeFull(block)
		require.NoError(r.t, err)
		if h.Stream != id {
			continue
		}
		for _, f := range fields {
			if f.Name == ":status" {
				n, _ := strconv.Atoi(f.Value)
				return n
			}
		}
	}
}

// Each flood of RFC 9113 §10.5 and the CVEs ends the connection with
// GOAWAY ENHANCE_YOUR_CALM, counted, while a well-behaved client on the
// same loop is served throughout.
func TestHTTP2Floods(t *testing.T) {
	floods := []struct {
		name  string
		frame func(r *rawH2, i int) []byte
	}{
		{"rapid reset (CVE-2023-44487)", func(r *rawH2, i int) []byte {
			id := uint32(2*i + 1)
			return h2.AppendRSTStream(h2.AppendHeaders(nil, id, false, r.block("GET", "/"), h2.MinMaxFrameSize), id, h2.Cancel)
		}},
		{"PING", func(_ *rawH2, i int) []byte { return h2.AppendPing(nil, false, [8]byte{byte(i)}) }},
		{"SETTINGS", func(_ *rawH2, _ int) []byte { return h2.AppendSettings(nil) }},
		{"empty DATA", func(r *rawH2, i int) []byte {
			if i == 0 {
				return h2.AppendHeaders(nil, 1, false, r.block("POST", "/echo"), h2.MinMaxFrameSize)
			}
			return h2.AppendData(nil, 1, false, nil)
		}},
		{"PRIORITY", func(_ *rawH2, i int) []byte {
			return append(h2.AppendHeader(nil, h2.Header{Length: 5, Type: h2.TypePriority, Stream: uint32(2*i + 1)}), 0, 0, 0, 0, 16)
		}},
	}
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		for _, fl := range floods {
			t.Run(fl.name, func(t *testing.T) {
				s := startServer(t, b, HandlerFunc(testHandler), WithNetOptions(vnet.WithLoops(1)))
				good := dialH2(t, s.Addr().String())
				require.NoError(t, good.write(good.get(1, "/")))
				require.Equal(t, 200, good.status(1))

				bad := dialH2(t, s.Addr().String())
				var burst []byte
				for i := range 3 * h2MaxCheapPerSecond {
					burst = append(burst, fl.frame(bad, i)...)
				}
				_ = bad.write(burst) // the server may close while this is written
				require.Equal(t, h2.EnhanceYourCalm, bad.goAway())
				require.Equal(t, uint64(1), s.Stats().HTTP2Calm)

				require.NoError(t, good.write(good.get(3, "/")))
				require.Equal(t, 200, good.status(3), "the other client is still served")
			})
		}
	})
}

// A header block continued without end (CVE-2023-45288, and httpd's
// CVE-2024-27316) is cut once it passes 64 KiB: the server does not hold
// it, and decodes none of it.
func TestHTTP2ContinuationFlood(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithNetOptions(vnet.WithLoops(1)))
		r := dialH2(t, s.Addr().String())
		frag := bytes.Repeat([]byte{0x40, 0x01, 'x', 0x01, 'y'}, 3000) // 15 KB of literals
		out := h2.AppendHeader(nil, h2.Header{Length: uint32(len(frag)), Type: h2.TypeHeaders, Stream: 1})
		out = append(out, frag...)
		for range 100 { // 1.5 MB in all, never END_HEADERS
			out = append(h2.AppendHeader(out, h2.Header{Length: uint32(len(frag)), Type: h2.TypeContinuation, Stream: 1}), frag...)
		}
		_ = r.write(out)
		require.Equal(t, h2.EnhanceYourCalm, r.goAway())
	})
}

// An HPACK bomb: one field added to the dynamic table, then referenced by
// index a thousand times, a few bytes each, decoding to 4 MB. The stream
// is answered 431 without the list being kept, and the connection goes
// on.
func TestHTTP2HPACKBomb(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithNetOptions(vnet.WithLoops(1)))
		r := dialH2(t, s.Addr().String())
		r.eb.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/"}, {":authority", "x"}} {
			_ = r.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		_ = r.enc.WriteField(hpack.HeaderField{Name: "bomb", Value: strings.Repeat("b", 4000)}) // indexed as 62
		block := bytes.Clone(r.eb.Bytes())
		for range 1000 {
			block = append(block, 0x80|62) // indexed field 62: 1 byte, 4 KB decoded
		}
		require.Less(t, len(block), 6<<10)
		require.NoError(t, r.write(h2.AppendHeaders(nil, 1, true, block, h2.MinMaxFrameSize)))
		require.Equal(t, StatusRequestHeaderFieldsTooLarge, r.status(1))
		require.NoError(t, r.write(r.get(3, "/")))
		require.Equal(t, 200, r.status(3))
	})
}

// A client that opens no window and never reads: its answers wait in the
// server up to about a megabyte, then its requests wait unanswered
// instead of growing memory.
func TestHTTP2ZeroWindowClientBounded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		big := bytes.Repeat([]byte("z"), 256<<10)
		h := HandlerFunc(func(w *ResponseWriter, r *Request) { _, _ = w.Write(big) })
		s := startServer(t, b, h, WithNetOptions(vnet.WithLoops(1)))
		r := dialH2(t, s.Addr().String(), h2.Setting{ID: h2.SettingInitialWindowSize, Val: 0})
		before := vmRSS(t)
		var out []byte
		for i := range 200 { // 50 MB of answers asked for
			out = append(out, r.get(uint32(2*i+1), "/")...)
		}
		require.NoError(t, r.write(out))
		require.Eventually(t, func() bool { return s.Stats().HTTP2Streams == 200 }, 10*time.Second, time.Millisecond)
		grew := vmRSS(t) - before
		require.Less(t, grew, int64(24<<20), "RSS grew %d MiB for 50 MB of unread answers", grew>>20)
		served := s.Stats().Requests
		require.Less(t, served, uint64(20), "about 1 MiB of 256 KiB answers run, then requests wait")
		t.Logf("RSS +%d KiB, %d of 200 answered", grew>>10, served)
	})
}

// Streams past SETTINGS_MAX_CONCURRENT_STREAMS are refused, counted, and
// the connection goes on.
func TestHTTP2StreamLimit(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		hold := make(chan struct{})
		h := FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, _ *nethttp.Request) {
			<-hold
			_, _ = io.WriteString(w, "done")
		}))
		s := startServer(t, b, h, WithNetOptions(vnet.WithLoops(1)))
		t.Cleanup(func() { close(hold) }) // before the server's shutdown
		r := dialH2(t, s.Addr().String())
		var out []byte
		for i := range h2MaxStreams + 1 {
			out = append(out, r.get(uint32(2*i+1), "/")...)
		}
		require.NoError(t, r.write(out))
		last := uint32(2*h2MaxStreams + 1)
		for {
			h, p, ok := r.next()
			require.True(t, ok)
			if h.Type == h2.TypeRSTStream {
				code, _ := h2.ParseRSTStream(h, p)
				require.Equal(t, last, h.Stream)
				require.Equal(t, h2.RefusedStream, code)
				break
			}
		}
		require.Equal(t, uint64(1), s.Stats().HTTP2Refused)
	})
}

// A stream ID lower than one already opened is a connection error.
func TestHTTP2StreamIDRegression(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithNetOptions(vnet.WithLoops(1)))
		r := dialH2(t, s.Addr().String())
		require.NoError(t, r.write(append(r.get(5, "/"), r.get(3, "/")...)))
		require.Equal(t, h2.StreamClosed, r.goAway())
		require.NotZero(t, s.Stats().ProtoErrors)
	})
}

// Frames on a closed stream get the errors RFC 9113 §5.1 names: DATA is
// a stream error STREAM_CLOSED (the connection goes on), HEADERS a
// connection error STREAM_CLOSED.
func TestHTTP2FramesOnClosedStreams(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithNetOptions(vnet.WithLoops(1)))
		r := dialH2(t, s.Addr().String())
		require.NoError(t, r.write(r.get(1, "/")))
		require.Equal(t, 200, r.status(1))
		require.Eventually(t, func() bool { return s.Stats().Requests == 1 }, 5*time.Second, time.Millisecond)

		require.NoError(t, r.write(h2.AppendData(nil, 1, false, []byte("late"))))
		for {
			h, p, ok := r.next()
			require.True(t, ok, "connection closed on DATA to a closed stream")
			if h.Type == h2.TypeRSTStream {
				code, err := h2.ParseRSTStream(h, p)
				require.NoError(t, err)
				require.Equal(t, uint32(1), h.Stream)
				require.Equal(t, h2.StreamClosed, code)
				break
			}
		}
		require.NoError(t, r.write(r.get(3, "/")))
		require.Equal(t, 200, r.status(3), "the connection goes on")

		require.NoError(t, r.write(r.get(1, "/")))
		require.Equal(t, h2.StreamClosed, r.goAway())
	})
}

// A frame longer than SETTINGS_MAX_FRAME_SIZE is a connection error
// FRAME_SIZE_ERROR, refused from its header: the server does not wait
// for (or hold) its payload.
func TestHTTP2OversizedFrame(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		s := startServer(t, b, HandlerFunc(testHandler), WithNetOptions(vnet.WithLoops(1)))
		r := dialH2(t, s.Addr().String())
		hdr := h2.AppendHeader(nil, h2.Header{Length: h2.MinMaxFrameSize + 1, Type: h2.TypeData, Stream: 1})
		require.NoError(t, r.write(hdr)) // the header alone: 16,385 bytes announced, none sent
		require.Equal(t, h2.FrameSizeError, r.goAway())
		require.NotZero(t, s.Stats().ProtoErrors)
	})
}

// rapidReset floods r with HEADERS and RST_STREAM on new streams, a
// hundred pairs a write, until n pairs are out or the server stops taking
// them; the client keeps sending while the server cuts it, as an attack
// does. wait waits for the writer.
func (r *rawH2) rapidReset(n int) (wait func()) {
	block := r.block("GET", "/")
	done := make(chan struct{})
	go func() {
		defer close(done)
		var out []byte
		for i := 0; i < n; i += 100 {
			out = out[:0]
			for j := i; j < i+100; j++ {
				id := uint32(2*j + 1)
				out = h2.AppendRSTStream(h2.AppendHeaders(out, id, true, block, h2.MinMaxFrameSize), id, h2.Cancel)
			}
			if r.write(out) != nil {
				return
			}
		}
	}()
	return func() { <-done }
}

// A rapid reset against FromStd handlers costs no more than against fast
// ones: the resets count toward the same budget and the client gets
// GOAWAY ENHANCE_YOUR_CALM (the cut lingered twice with a stream open, so
// it closed with the client's flood unread, and the kernel's reset
// destroyed the GOAWAY); the handlers of reset streams, winding down, are
// bounded per connection, however long they ignore their context; and
// they all return once they look.
func TestHTTP2RapidResetFromStd(t *testing.T) {
	handlers := []struct {
		name string
		wait func(r *nethttp.Request, release <-chan struct{})
	}{
		{"waits for its context", func(r *nethttp.Request, _ <-chan struct{}) { <-r.Context().Done() }},
		{"ignores its context", func(_ *nethttp.Request, release <-chan struct{}) { <-release }},
	}
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		for _, hd := range handlers {
			t.Run(hd.name, func(t *testing.T) {
				var running, peak atomic.Int64
				release := make(chan struct{})
				h := FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
					if r.URL.Path == "/ok" {
						_, _ = io.WriteString(w, "ok")
						return
					}
					n := running.Add(1)
					defer running.Add(-1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					hd.wait(r, release)
				}))
				s := startServer(t, b, h, WithNetOptions(vnet.WithLoops(1)))
				closeRelease := sync.OnceFunc(func() { close(release) })
				t.Cleanup(closeRelease) // before the server's shutdown
				good := dialH2(t, s.Addr().String())
				require.NoError(t, good.write(good.get(1, "/ok")))
				require.Equal(t, 200, good.status(1))

				bad := dialH2(t, s.Addr().String())
				wait := bad.rapidReset(50 * h2MaxCheapPerSecond)
				require.Equal(t, h2.EnhanceYourCalm, bad.goAway())
				require.ErrorIs(t, bad.end, io.EOF, "the server closes gracefully: a reset can destroy the GOAWAY")
				bad.c.Close()
				wait()
				require.Equal(t, uint64(1), s.Stats().HTTP2Calm)
				require.LessOrEqual(t, peak.Load(), int64(h2MaxStdLive), "handlers running at once on one connection")
				st := s.Stats()
				require.Less(t, st.Offloaded, st.HTTP2Streams/4, "a stream reset in the same input starts no handler")

				require.NoError(t, good.write(good.get(3, "/ok")))
				require.Equal(t, 200, good.status(3), "the other client is still served")

				closeRelease()
				require.Eventually(t, func() bool { return running.Load() == 0 }, 10*time.Second, time.Millisecond,
					"%d handlers still running", running.Load())
				t.Logf("peak %d handlers; %d streams, %d handlers started, %d refused", peak.Load(), st.HTTP2Streams, st.Offloaded, st.HTTP2Refused)
			})
		}
	})
}

// The FromStd handlers of streams reset after they started (each reset
// in its own input) wind down on their own time: a connection has at
// most h2MaxStdLive of them running, and refuses new streams past that
// (REFUSED_STREAM) until they return; then it serves again.
func TestHTTP2FromStdResetHandlersBounded(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var running atomic.Int64
		release := make(chan struct{})
		h := FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			if r.URL.Path == "/ok" {
				_, _ = io.WriteString(w, "ok")
				return
			}
			running.Add(1)
			defer running.Add(-1)
			<-release // ignores its context
		}))
		s := startServer(t, b, h, WithNetOptions(vnet.WithLoops(1)))
		closeRelease := sync.OnceFunc(func() { close(release) })
		t.Cleanup(closeRelease) // before the server's shutdown
		r := dialH2(t, s.Addr().String())
		const batch = 100 // under the stream limit, and the resets under the cheap-frame budget
		id := uint32(1)
		for round := 1; round <= 3; round++ {
			var heads, rsts []byte
			for range batch {
				heads = append(heads, r.get(id, "/")...)
				rsts = h2.AppendRSTStream(rsts, id, h2.Cancel)
				id += 2
			}
			require.NoError(t, r.write(heads))
			want := int64(min(round*batch, h2MaxStdLive))
			require.Eventually(t, func() bool {
				return running.Load() == want && s.Stats().HTTP2Refused == uint64(round*batch)-uint64(want)
			}, 10*time.Second, time.Millisecond, "round %d: %d handlers should run, the rest be refused", round, want)
			require.NoError(t, r.write(rsts))
		}
		require.Equal(t, int64(h2MaxStdLive), running.Load(), "the reset handlers still run")
		require.Zero(t, s.Stats().HTTP2Calm)

		closeRelease()
		require.Eventually(t, func() bool { return running.Load() == 0 }, 10*time.Second, time.Millisecond)
		// The handlers' ends may still be on their way to the loop: a
		// request refused meanwhile is asked again, a round trip later.
		for served := false; !served; id += 2 {
			require.Less(t, id, uint32(1<<20), "the connection never serves again")
			require.NoError(t, r.write(r.get(id, "/ok")))
			served = r.answered(id)
		}
	})
}

// answered reads until stream id's answer, and reports whether it came
// (false: the stream was reset).
func (r *rawH2) answered(id uint32) bool {
	for {
		h, p, ok := r.next()
		require.True(r.t, ok, "connection closed before stream %d's answer", id)
		if h.Type == h2.TypeRSTStream && h.Stream == id {
			return false
		}
		if h.Type != h2.TypeHeaders {
			continue
		}
		block, err := h2.ParseHeaders(h, p)
		require.NoError(r.t, err)
		_, err = r.dec.DecodeFull(block)
		require.NoError(r.t, err)
		if h.Stream == id {
			return true
		}
	}
}
