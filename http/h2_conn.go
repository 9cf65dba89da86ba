package http

import (
	"bytes"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/veloq/veloq/http/internal/h1"
	"github.com/veloq/veloq/http/internal/h2"
	"golang.org/x/net/http2/hpack"
)

// HTTP/2 connections (RFC 9113). A connection that starts with the client
// preface (prior knowledge, h2c) or negotiated "h2" by ALPN leaves the
// HTTP/1 cycle for phaseH2: its conn record stays (server list, count,
// timer), and its input is read as frames by h2Conn.
//
// Frames are taken from the input in order on the loop. Each stream is an
// exchange (h2_stream.go), so fast handlers run inline on the loop when
// their request is complete, and Offloaded and FromStd handlers run off it
// as for HTTP/1; many streams are in progress at once. What bounds a
// connection:
//   - streams: at most maxStreams open (SETTINGS_MAX_CONCURRENT_STREAMS);
//     one more is refused with REFUSED_STREAM;
//   - FromStd handlers: at most h2MaxStdLive running, those of streams
//     already reset or closed included; one more stream is refused;
//   - header blocks: at most h2MaxBlock compressed bytes across
//     CONTINUATION frames, and the decoded list at most the server's
//     MaxHeaderBytes (431 beyond it);
//   - request bodies: flow control (a stream's window is given back as
//     its handler takes the bytes), and MaxBodyBytes for fast handlers;
//   - responses: the client's windows; output past them waits in the
//     stream, and a FromStd or streaming writer waits with it;
//   - cheap frames (RST_STREAM, PING, SETTINGS, PRIORITY, empty DATA):
//     at most h2MaxCheapPerSecond a second, then GOAWAY ENHANCE_YOUR_CALM
//     (rapid reset, CVE-2023-44487, and the floods of RFC 9113 §10.5);
//   - reading stops while the client does not take its output
//     (Conn.Backlogged), as for HTTP/1 pipelining.
type h2Conn struct {
	cs  *conn
	srv *Server
	ls  *loopState

	peer       h2.Settings // the client's
	prefaceIn  bool        // the client preface was read
	settingsIn bool        // the client's first SETTINGS was read

	// The decoder is the connection's own: its dynamic table is the
	// client's to fill. What it decodes goes to the loop's h2Shared, and
	// answers are encoded there too (h2_shared.go).
	dec         *hpack.Decoder
	listSize    uint32
	maxListSize uint32
	listTooBig  bool

	streams h2Streams
	lastID  uint32 // the highest stream the client opened
	// resets marks the streams among the last 32 the client opened that
	// the server reset (bit k: stream lastID-2k): their frames still in
	// flight are ignored (RFC 9113 §5.1), not answered STREAM_CLOSED. A
	// uint32 fits the padding after lastID: h2Conn stays 256 bytes (a
	// uint64 made it 264, the 288-byte size class).
	resets  uint32
	sendWin h2.Window
	recvWin h2.Window
	unacked int // bytes received and taken, not yet given back to recvWin
	blocked []*h2Stream
	// pendingOut is the DATA all streams hold for the client's windows;
	// over h2MaxPending, complete requests wait in ready instead of
	// running, so a client that opens no window holds about that much.
	pendingOut int
	ready      []*h2Stream
	goingAway  bool // GOAWAY sent: no new streams
	// shutPinged: Shutdown's first GOAWAY (the largest stream id) and its
	// PING are out; the final GOAWAY waits for the PING's ack. A bool in
	// the padding after goingAway: h2Conn stays 256 bytes.
	shutPinged bool
	// stdLive counts the FromStd handlers started on this connection
	// that have not returned, their stream open or not: a stream the
	// client resets leaves at once, but its handler runs on until it
	// notices its context (if ever). Over h2MaxStdLive, new streams are
	// refused. An int32 beside goingAway, in what was padding: h2Conn
	// stays 256 bytes, its size class.
	stdLive int32

	// A header block that continues in CONTINUATION frames, collected
	// here until its end (a block in one HEADERS is decoded where it is).
	contID  uint32
	contEnd bool  // the HEADERS had END_STREAM
	blockIn int64 // wire bytes of the header block's frames, for the completion hook
	block   []byte

	cheapAt int64 // loop clock when the cheap-frame second began
	cheap   int
	lastIn  int64 // loop clock when input last arrived
}

// Bounds of an HTTP/2 connection.
const (
	h2MaxStreams = 250 // SETTINGS_MAX_CONCURRENT_STREAMS, as Go's server
	// h2MaxStdLive bounds the FromStd handlers a connection has running.
	// A well-behaved client never reaches it (a handler's stream stays
	// open until the handler returns, unless it is reset), so it only
	// stops one that resets streams faster than their handlers wind
	// down: without it, a rapid reset under h2MaxCheapPerSecond (999 a
	// second) against a handler that ignores its context for a second
	// kept up to a thousand goroutines per connection, and the flood of a
	// test (TestHTTP2RapidResetFromStd) had 1,001 running at once.
	h2MaxStdLive = h2MaxStreams
	// h2ConnWindow is the connection's receive window; each stream has
	// the protocol's default, 65,535.
	h2ConnWindow = 1 << 20
	// h2MaxBlock bounds a header block's compressed bytes across its
	// CONTINUATION frames (CVE-2023-45288).
	h2MaxBlock = 64 << 10
	// h2MaxCheapPerSecond bounds the frames that cost the server work
	// and the client nothing.
	h2MaxCheapPerSecond = 1000
	// h2MaxPending bounds the answers a connection holds for the client's
	// flow-control windows before it runs no more fast handlers.
	h2MaxPending = 1 << 20
)

// startH2 makes cs an HTTP/2 connection and sends the server preface. The
// client preface is read next (OnData).
func (cs *conn) startH2() {
	cs.dropState() // HTTP/1's request state: an h2c upgrade's request was the last
	ls := cs.ls
	hc := &h2Conn{cs: cs, srv: cs.ls.srv, ls: ls, peer: h2.DefaultSettings}
	hc.maxListSize = uint32(cs.ls.srv.limits.maxHeaderBytes())
	hc.dec = hpack.NewDecoder(4096, hc.emitField)
	hc.dec.SetMaxStringLength(int(hc.maxListSize))
	ls.h2Shared() // made with the loop's first HTTP/2 connection
	hc.sendWin = h2.Window(h2.DefaultSettings.InitialWindowSize)
	hc.recvWin = h2ConnWindow
	cs.h2 = hc
	cs.phase = phaseH2
	cs.phaseStart = cs.now()
	ls.st.h2conns.Add(1)
	out := h2.AppendSettings(ls.scratch[:0],
		h2.Setting{ID: h2.SettingMaxConcurrentStreams, Val: h2MaxStreams},
		h2.Setting{ID: h2.SettingMaxHeaderListSize, Val: hc.maxListSize},
		h2.Setting{ID: h2.SettingEnablePush, Val: 0})
	out = h2.AppendWindowUpdate(out, 0, h2ConnWindow-65535)
	ls.scratch = out
	cs.c.Write(out)
}

// upgradeH2 switches an HTTP/1.1 request with "Upgrade: h2c" to HTTP/2
// (RFC 7540 §3.2, which RFC 9113 deprecates but curl --http2 still uses
// in plaintext): 101 Switching Protocols, the server preface, and the
// request becomes stream 1, half-closed (remote). A request with a body
// stays HTTP/1.1 (the caller checks), as Go's h2c does not take one
// either.
func (cs *conn) upgradeH2(req *Request, settings []byte) {
	raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(string(settings), "="))
	if err != nil || len(raw)%6 != 0 {
		cs.ls.st.protoErrors.Add(1)
		cs.fail(StatusBadRequest)
		return
	}
	ls := cs.ls
	ls.scratch = append(ls.scratch[:0], "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n"...)
	cs.c.Write(ls.scratch)
	cs.startH2()
	hc := cs.h2
	if err := h2.ParseSettings(h2.Header{Type: h2.TypeSettings, Length: uint32(len(raw))}, raw, hc.peer.Apply); err != nil {
		hc.connError(err)
		return
	}
	st := hc.newStream(1)
	hc.opened(1)
	hc.streams.add(st)
	st.arena = copyRequest(&st.req, req, st.arena)
	r := &st.req
	r.ProtoMajor, r.ProtoMinor, r.Upgrade, r.Close = 2, 0, nil, false
	// What belonged to the HTTP/1.1 hop goes.
	r.Headers = slices.DeleteFunc(r.Headers, func(f HeaderField) bool {
		return h1.EqualFold(f.Name, "connection") || h1.EqualFold(f.Name, "upgrade") ||
			h1.EqualFold(f.Name, "http2-settings") || h1.EqualFold(f.Name, "keep-alive")
	})
	st.remoteDone = true
	hc.ls.st.h2streams.Add(1)
	if hc.srv.opts.completion != nil {
		st.rec.begin(&st.req, 0, cs.now()) // its HTTP/1.1 head was the connection's
	}
	st.start()
}

// isH2Preface reports whether in starts like the client preface: true
// for a prefix of it too, so that a preface that arrives in pieces waits.
func isH2Preface(in []byte) bool {
	n := min(len(in), len(h2.ClientPreface))
	return n > 0 && string(in[:n]) == h2.ClientPreface[:n]
}

// isRequestLine reports whether the first line of in is shaped as an
// HTTP/1 request line, so that a client who sent it is answered even if
// the line is malformed (see conn.protoError): it starts with an empty
// line (RFC 9112 §2.2), its method is a standard one, or a word of it
// after the method starts with "HTTP/" in any letter case.
func isRequestLine(in []byte) bool {
	if len(in) > 0 && (in[0] == '\r' || in[0] == '\n') {
		return true
	}
	if i := bytes.IndexByte(in, '\n'); i >= 0 {
		in = in[:i]
	}
	method, rest, _ := bytes.Cut(in, []byte(" "))
	switch string(method) {
	case "GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH":
		return true
	}
	for len(rest) > 0 {
		var word []byte
		word, rest, _ = bytes.Cut(rest, []byte(" "))
		if len(word) >= 5 && h1.EqualFold(word[:5], "http/") {
			return true
		}
	}
	return false
}

// lineEnded reports whether in holds the end of its first line, or as
// much as a head may hold.
func lineEnded(in []byte, maxHead int) bool {
	return len(in) >= maxHead || bytes.IndexByte(in, '\n') >= 0
}

// onData reads the frames in the input.
func (hc *h2Conn) onData() {
	c := hc.cs.c
	hc.lastIn = hc.cs.now()
	defer hc.arm()
	for !c.Closed() && hc.cs.phase == phaseH2 {
		if c.Backlogged() {
			return // the client does not read: its frames wait (see conn.serveLoop)
		}
		buf, _ := c.Peek(0)
		if !hc.prefaceIn {
			if len(buf) < len(h2.ClientPreface) {
				if !isH2Preface(buf) {
					hc.connError(h2.ConnError(h2.ProtocolError, "no client preface"))
				}
				return
			}
			if string(buf[:len(h2.ClientPreface)]) != h2.ClientPreface {
				hc.connError(h2.ConnError(h2.ProtocolError, "no client preface"))
				return
			}
			hc.prefaceIn = true
			c.Discard(len(h2.ClientPreface))
			continue
		}
		h, p, n, err := h2.Next(buf, h2.MinMaxFrameSize)
		if err != nil {
			hc.connError(err)
			return
		}
		if n == 0 {
			if hc.cs.eof {
				hc.peerClosed() // the frames held back by Backlogged are read
			}
			return
		}
		err = hc.frame(h, p)
		c.Discard(n)
		if err != nil {
			if !hc.fail(err) {
				return
			}
		}
	}
}

// fail answers a frame's error: RST_STREAM for a stream error, GOAWAY and
// close for a connection error. It reports whether reading goes on.
func (hc *h2Conn) fail(err error) bool {
	e, ok := err.(*h2.Error)
	if !ok {
		e = h2.ConnError(h2.InternalError, err.Error())
	}
	if e.Stream == 0 {
		hc.connError(e)
		return false
	}
	hc.ls.st.h2resets.Add(1)
	if st := hc.streams.get(e.Stream); st != nil {
		hc.closeStream(st, e.Code, true)
	} else {
		hc.writeRST(e.Stream, e.Code)
		if e.Code == h2.RefusedStream {
			hc.markReset(e.Stream) // its body may be on the way
		}
	}
	return true
}

// connError ends the connection: GOAWAY with the error, then close after
// the output.
func (hc *h2Conn) connError(err error) {
	e, ok := err.(*h2.Error)
	if !ok {
		e = h2.ConnError(h2.InternalError, err.Error())
	}
	cs := hc.cs
	cs.ls.st.protoErrors.Add(1)
	if e.Code == h2.EnhanceYourCalm {
		cs.ls.st.h2calm.Add(1)
	}
	cs.ls.srv.opts.logger.Debug("http: HTTP/2 connection error", "code", e.Code.String(), "reason", e.Reason, "remote", cs.c.RemoteAddr())
	ls := hc.ls
	ls.scratch = h2.AppendGoAway(ls.scratch[:0], hc.lastID, e.Code, []byte(e.Reason))
	cs.c.Write(ls.scratch)
	hc.goingAway = true
	hc.closeAll()
	cs.linger()
}

// cheapFrame counts a frame that costs the client nothing; too many in a
// second is a connection error ENHANCE_YOUR_CALM.
func (hc *h2Conn) cheapFrame() error {
	now := hc.cs.now()
	if now-hc.cheapAt > int64(time.Second) {
		hc.cheapAt, hc.cheap = now, 0
	}
	hc.cheap++
	if hc.cheap > h2MaxCheapPerSecond {
		return h2.ConnError(h2.EnhanceYourCalm, "too many RST_STREAM, PING, SETTINGS, PRIORITY or empty frames")
	}
	return nil
}

// frame handles one frame (RFC 9113 §5.1, §6).
func (hc *h2Conn) frame(h h2.Header, p []byte) error {
	if hc.contID != 0 && (h.Type != h2.TypeContinuation || h.Stream != hc.contID) {
		return h2.ConnError(h2.ProtocolError, "header block interrupted by "+h.Type.String())
	}
	if !hc.settingsIn && h.Type != h2.TypeSettings {
		return h2.ConnError(h2.ProtocolError, "first frame is not SETTINGS")
	}
	switch h.Type {
	case h2.TypeData:
		return hc.onDataFrame(h, p)
	case h2.TypeHeaders:
		return hc.onHeaders(h, p)
	case h2.TypeContinuation:
		return hc.onContinuation(h, p)
	case h2.TypePriority:
		if _, err := h2.ParsePriority(h, p); err != nil {
			return err
		}
		return hc.cheapFrame()
	case h2.TypeRSTStream:
		return hc.onRST(h, p)
	case h2.TypeSettings:
		return hc.onSettings(h, p)
	case h2.TypePushPromise:
		return h2.ConnError(h2.ProtocolError, "PUSH_PROMISE from a client")
	case h2.TypePing:
		data, err := h2.ParsePing(h, p)
		if err != nil {
			return err
		}
		if h.Flags.Has(h2.FlagAck) {
			if hc.shutPinged && data == shutdownPing {
				hc.goAway() // the client has seen the first GOAWAY
			}
			return nil
		}
		if err := hc.cheapFrame(); err != nil {
			return err
		}
		hc.ls.scratch = h2.AppendPing(hc.ls.scratch[:0], true, data)
		hc.cs.c.Write(hc.ls.scratch)
		return nil
	case h2.TypeGoAway:
		if _, _, _, err := h2.ParseGoAway(h, p); err != nil {
			return err
		}
		hc.goingAway = true
		hc.closeIfDone()
		return nil
	case h2.TypeWindowUpdate:
		return hc.onWindowUpdate(h, p)
	}
	return nil // unknown types are ignored (RFC 9113 §4.1)
}

func (hc *h2Conn) onSettings(h h2.Header, p []byte) error {
	if h.Flags.Has(h2.FlagAck) {
		return h2.ParseSettings(h, p, nil) // checks it; an acknowledgement has no parameters
	}
	if hc.settingsIn {
		if err := hc.cheapFrame(); err != nil {
			return err
		}
	}
	hc.settingsIn = true
	oldWin := int64(hc.peer.InitialWindowSize)
	err := h2.ParseSettings(h, p, func(s h2.Setting) error {
		if err := hc.peer.Apply(s); err != nil {
			return err
		}
		// SETTINGS_HEADER_TABLE_SIZE needs nothing: answers are
		// encoded without the dynamic table (h2Shared), which fits any
		// size the client allows, 0 included.
		return nil
	})
	if err != nil {
		return err
	}
	if d := int64(hc.peer.InitialWindowSize) - oldWin; d != 0 {
		// RFC 9113 §6.9.2: the change applies to every open stream; a
		// window pushed past 2^31-1 is a connection error.
		for _, e := range hc.streams {
			if err := e.st.sendWin.Add(0, d); err != nil {
				return err
			}
		}
	}
	hc.ls.scratch = h2.AppendSettingsAck(hc.ls.scratch[:0])
	hc.cs.c.Write(hc.ls.scratch)
	hc.flushBlocked()
	hc.streams.each((*h2Stream).flush)
	hc.runReady()
	return nil
}

func (hc *h2Conn) onWindowUpdate(h h2.Header, p []byte) error {
	inc, err := h2.ParseWindowUpdate(h, p)
	if err != nil {
		var e *h2.Error
		if errors.As(err, &e) && e.Stream != 0 && hc.idle(h.Stream) {
			return h2.ConnError(h2.ProtocolError, "WINDOW_UPDATE on an idle stream")
		}
		return err
	}
	if h.Stream == 0 {
		if err := hc.sendWin.Add(0, int64(inc)); err != nil {
			return err
		}
		hc.flushBlocked()
		hc.runReady()
		return nil
	}
	st := hc.streams.get(h.Stream)
	if st == nil {
		if hc.idle(h.Stream) {
			return h2.ConnError(h2.ProtocolError, "WINDOW_UPDATE on an idle stream")
		}
		return nil // a closed stream: the update crossed our end of it
	}
	if err := st.sendWin.Add(st.id, int64(inc)); err != nil {
		return err
	}
	st.flush()
	hc.runReady()
	return nil
}

// runReady runs the requests that waited for the answers before them to
// leave.
func (hc *h2Conn) runReady() {
	for len(hc.ready) > 0 && hc.pendingOut <= h2MaxPending/2 {
		st := hc.ready[0]
		hc.ready[0] = nil
		hc.ready = hc.ready[1:]
		if !st.closed {
			st.serve()
		}
	}
	if len(hc.ready) == 0 {
		hc.ready = nil
	}
}

func (hc *h2Conn) onRST(h h2.Header, p []byte) error {
	if _, err := h2.ParseRSTStream(h, p); err != nil {
		return err
	}
	if hc.idle(h.Stream) {
		return h2.ConnError(h2.ProtocolError, "RST_STREAM on an idle stream")
	}
	if err := hc.cheapFrame(); err != nil {
		return err
	}
	if st := hc.streams.get(h.Stream); st != nil {
		hc.closeStream(st, 0, false)
	}
	return nil
}

// onHeaders starts a stream (or ends one with trailers) once its header
// block is complete.
func (hc *h2Conn) onHeaders(h h2.Header, p []byte) error {
	frag, err := h2.ParseHeaders(h, p)
	if err != nil {
		return err
	}
	if h.Stream%2 == 0 {
		return h2.ConnError(h2.ProtocolError, "HEADERS on a server stream")
	}
	hc.contEnd = h.Flags.Has(h2.FlagEndStream)
	hc.blockIn = int64(h2.HeaderLen + len(p))
	if !h.Flags.Has(h2.FlagEndHeaders) {
		hc.contID = h.Stream
		hc.block = append(hc.block[:0], frag...)
		return nil
	}
	return hc.endBlock(h.Stream, frag)
}

func (hc *h2Conn) onContinuation(h h2.Header, p []byte) error {
	frag, err := h2.ParseContinuation(h, p)
	if err != nil {
		return err
	}
	if hc.contID == 0 {
		return h2.ConnError(h2.ProtocolError, "CONTINUATION without HEADERS")
	}
	if len(frag) == 0 && !h.Flags.Has(h2.FlagEndHeaders) {
		if err := hc.cheapFrame(); err != nil {
			return err
		}
	}
	if len(hc.block)+len(frag) > h2MaxBlock {
		return h2.ConnError(h2.EnhanceYourCalm, "header block over 64 KiB")
	}
	hc.block = append(hc.block, frag...)
	hc.blockIn += int64(h2.HeaderLen + len(p))
	if !h.Flags.Has(h2.FlagEndHeaders) {
		return nil
	}
	hc.contID = 0
	block := hc.block
	hc.block = nil // a connection keeps no block between requests
	return hc.endBlock(h.Stream, block)
}

// endBlock handles a complete header block on stream id: trailers of an
// open stream, or a new stream.
func (hc *h2Conn) endBlock(id uint32, block []byte) error {
	if err := hc.decodeBlock(block); err != nil {
		return err
	}
	if st := hc.streams.get(id); st != nil {
		if st.remoteDone {
			return h2.StreamError(id, h2.StreamClosed, "HEADERS after END_STREAM")
		}
		if err := hc.checkTrailers(id, hc.contEnd); err != nil {
			return err
		}
		if d := st.reader(); d != nil {
			for _, f := range hc.ls.h2.fields {
				d.body.trailer.Add(f.Name, f.Value) // for BodyTrailer
			}
		} else if x := st.stdx; x != nil && x.pipe != nil && !x.bodyDone {
			for _, f := range hc.ls.h2.fields {
				x.pipe.addTrailer(f.Name, f.Value) // for the handler's Request.Trailer
			}
		}
		return st.bodyEnded()
	}
	if id <= hc.lastID {
		if hc.wasReset(id) {
			return nil // trailers sent before our RST_STREAM arrived
		}
		return h2.ConnError(h2.StreamClosed, "HEADERS on a closed stream")
	}
	hc.opened(id)
	if hc.goingAway {
		return nil // RFC 9113 §6.8: streams after GOAWAY are not processed
	}
	if len(hc.streams) >= h2MaxStreams {
		hc.ls.st.h2refused.Add(1)
		return h2.StreamError(id, h2.RefusedStream, "over SETTINGS_MAX_CONCURRENT_STREAMS")
	}
	st := hc.newStream(id)
	if hc.listTooBig {
		hc.streams.add(st)
		st.remoteDone = hc.contEnd
		if hc.srv.opts.completion != nil {
			st.rec.begin(nil, hc.blockIn, hc.cs.now())
			st.rec.proto = "HTTP/2"
		}
		st.respondError(StatusRequestHeaderFieldsTooLarge)
		return nil
	}
	if err := hc.buildRequest(st, hc.contEnd); err != nil {
		return err
	}
	hc.streams.add(st)
	hc.cs.phaseStart = hc.cs.now()
	hc.ls.st.h2streams.Add(1)
	st.remoteDone = hc.contEnd
	if hc.srv.opts.completion != nil {
		st.rec.begin(&st.req, hc.blockIn, hc.cs.phaseStart)
	}
	st.start()
	return nil
}

// onDataFrame takes a DATA frame's bytes for its stream (RFC 9113 §6.1).
// The whole payload counts against both receive windows.
func (hc *h2Conn) onDataFrame(h h2.Header, p []byte) error {
	data, err := h2.ParseData(h, p)
	if err != nil {
		return err
	}
	if err := hc.recvWin.Take(0, len(p)); err != nil {
		return err
	}
	// The connection's window is given back at once: the streams' own
	// windows bound what waits in them.
	hc.giveBack(len(p))
	st := hc.streams.get(h.Stream)
	if st == nil {
		if hc.idle(h.Stream) {
			return h2.ConnError(h2.ProtocolError, "DATA on an idle stream")
		}
		if hc.wasReset(h.Stream) {
			return nil // its window was given back above
		}
		return h2.StreamError(h.Stream, h2.StreamClosed, "DATA on a closed stream")
	}
	if st.remoteDone {
		return h2.StreamError(h.Stream, h2.StreamClosed, "DATA after END_STREAM")
	}
	if err := st.recvWin.Take(st.id, len(p)); err != nil {
		return err
	}
	st.rec.in += int64(h2.HeaderLen + len(p))
	if len(p) == 0 && !h.Flags.Has(h2.FlagEndStream) {
		if err := hc.cheapFrame(); err != nil {
			return err
		}
	}
	st.padding += len(p) - len(data)
	if err := st.bodyData(data); err != nil {
		return err
	}
	if h.Flags.Has(h2.FlagEndStream) {
		return st.bodyEnded()
	}
	return nil
}

// giveBack returns n bytes to the connection's receive window, in
// WINDOW_UPDATEs of at least a quarter of it.
func (hc *h2Conn) giveBack(n int) {
	hc.unacked += n
	if hc.unacked < h2ConnWindow/4 {
		return
	}
	hc.recvWin += h2.Window(hc.unacked)
	hc.ls.scratch = h2.AppendWindowUpdate(hc.ls.scratch[:0], 0, uint32(hc.unacked))
	hc.cs.c.Write(hc.ls.scratch)
	hc.unacked = 0
}

// writeRST ends stream id with code.
func (hc *h2Conn) writeRST(id uint32, code h2.ErrCode) {
	hc.ls.scratch = h2.AppendRSTStream(hc.ls.scratch[:0], id, code)
	hc.cs.c.Write(hc.ls.scratch)
}

// markReset remembers that the server reset stream id while the client
// could still send on it (see wasReset).
func (hc *h2Conn) markReset(id uint32) {
	if k := (hc.lastID - id) / 2; id%2 == 1 && id <= hc.lastID && k < 32 {
		hc.resets |= 1 << k
	}
}

// idle reports whether stream id is idle (RFC 9113 §5.1): a client
// stream above the highest the client opened, or any server stream, as
// the server pushes none. A frame on it other than HEADERS or PRIORITY
// is a connection error PROTOCOL_ERROR; an even ID used to fall through
// to the closed streams below lastID and got RST_STREAM STREAM_CLOSED.
func (hc *h2Conn) idle(id uint32) bool {
	return id%2 == 0 || id > hc.lastID
}

// opened records id as the highest stream the client opened.
func (hc *h2Conn) opened(id uint32) {
	if k := (id - hc.lastID) / 2; k < 32 {
		hc.resets <<= k
	} else {
		hc.resets = 0
	}
	hc.lastID = id
}

// wasReset reports whether the server reset stream id while it was open
// (or refused it), recently enough to remember it. A client may have
// sent DATA or trailers before it saw the RST_STREAM: those are dropped
// without an answer (RFC 9113 §5.1: "An endpoint MUST ignore frames that
// it receives on closed streams after it has sent a RST_STREAM frame"),
// where answering each with RST_STREAM STREAM_CLOSED would tell a client
// that stopped in time it broke the protocol. A stream older than the
// last 32 falls back to STREAM_CLOSED, as Go's server answers every such
// frame.
func (hc *h2Conn) wasReset(id uint32) bool {
	k := (hc.lastID - id) / 2
	return id%2 == 1 && id <= hc.lastID && k < 32 && hc.resets&(1<<k) != 0
}

// flushBlocked sends what streams held back for the connection's window.
func (hc *h2Conn) flushBlocked() {
	b := hc.blocked
	hc.blocked = nil
	for _, st := range b {
		st.inBlocked = false
		st.flush()
	}
}

// goAway starts a graceful close (Shutdown): GOAWAY NO_ERROR, the streams
// in progress finish, new ones are not processed.
func (hc *h2Conn) goAway() {
	if hc.goingAway {
		return
	}
	hc.goingAway = true
	hc.ls.scratch = h2.AppendGoAway(hc.ls.scratch[:0], hc.lastID, h2.NoError, nil)
	hc.cs.c.Write(hc.ls.scratch)
	// Streams whose answer is complete only wait for the rest of a body
	// nobody reads: they end now.
	hc.streams.each(func(st *h2Stream) {
		if st.localDone {
			hc.closeStream(st, h2.NoError, true)
		}
	})
	hc.closeIfDone()
}

// shutdownPing is the opaque data of Shutdown's PING (any 8 bytes do:
// only its ack, which echoes them, is matched).
var shutdownPing = [8]byte{'s', 'h', 'u', 't', 'd', 'o', 'w', 'n'}

// shutdown starts Shutdown's graceful close as RFC 9113 §6.8 advises: a
// GOAWAY with the largest stream id, which tells the client to open no
// more streams while those already on their way are still processed, and
// a PING. Its ack proves that the client saw the GOAWAY, so the final
// GOAWAY (goAway, the last stream really opened) refuses no stream the
// client sent before it. A single GOAWAY naming the last stream at once
// refused such streams: a request in flight when the server decided to
// go was not processed (the client must retry it elsewhere).
func (hc *h2Conn) shutdown() {
	if hc.goingAway || hc.shutPinged {
		return
	}
	hc.shutPinged = true
	b := h2.AppendGoAway(hc.ls.scratch[:0], 1<<31-1, h2.NoError, nil)
	b = h2.AppendPing(b, false, shutdownPing)
	hc.ls.scratch = b
	hc.cs.c.Write(b)
}

// closeIfDone closes a connection going away once its streams are done.
// During Shutdown it waits for the PING's ack (the final GOAWAY, after
// which it closes) even without streams: a stream may be on its way.
func (hc *h2Conn) closeIfDone() {
	if len(hc.streams) != 0 {
		return
	}
	switch {
	case hc.goingAway:
		hc.cs.linger()
	case hc.cs.eof:
		hc.goAway()
	case hc.srv.shutting.Load():
		hc.shutdown()
	}
}

// peerClosed handles the client's FIN once the frames before it are
// read: a stream still waiting for the client (its body, or its
// END_STREAM) can never complete, and the read-body timeout used to hold
// the connection until it fired (60 s by default). Each such stream is
// abandoned (h2Stream.peerClosed); the answers in progress still go out,
// and the connection closes after the last (closeIfDone). An answer
// waiting for the client's flow-control window is reset (h2Stream.flush):
// the WINDOW_UPDATE it needs cannot come any more.
func (hc *h2Conn) peerClosed() {
	if hc.cs.c.Backlogged() || hc.cs.c.Closed() || hc.cs.phase != phaseH2 {
		return // frames still wait in the input: onData comes back here after them
	}
	hc.streams.each(func(st *h2Stream) {
		switch {
		case st.closed:
		case !st.remoteDone:
			st.peerClosed()
		case st.cancel != nil:
			// Its answer is produced off the protocol (offloaded,
			// detached): the client went, as over HTTP/1 (conn.onEOF).
			st.cancel()
		}
		if !st.closed && len(st.pending) > 0 {
			st.flush() // it waits for a window that cannot open now: reset
		}
	})
	hc.closeIfDone()
	hc.arm()
}

// timedOut ends the connection at its deadline (the idle or the
// read-body timeout) with GOAWAY NO_ERROR first, its last stream ID
// telling the client which of its streams may have been processed (RFC
// 9113 §6.8); it used to close without one.
func (hc *h2Conn) timedOut() {
	if !hc.goingAway {
		hc.goingAway = true
		hc.ls.scratch = h2.AppendGoAway(hc.ls.scratch[:0], hc.lastID, h2.NoError, []byte("timeout"))
		hc.cs.c.Write(hc.ls.scratch)
	}
	hc.cs.c.Close()
}

// closeAll ends every stream: the connection is going.
func (hc *h2Conn) closeAll() {
	hc.streams.each(func(st *h2Stream) { hc.closeStream(st, 0, false) })
}

// deadline is when the connection's timer closes it (loop clock), 0 for
// never: the idle timeout once no stream is open; the read-body timeout
// while a stream waits for the client's body and nothing arrives (a
// client that opens streams and goes silent holds their slots no longer
// than an HTTP/1 client its body).
func (hc *h2Conn) deadline() int64 {
	o := &hc.srv.opts
	if len(hc.streams) == 0 {
		if o.idleTimeout > 0 {
			return hc.cs.phaseStart + int64(o.idleTimeout)
		}
		return 0
	}
	if o.readBodyTimeout <= 0 {
		return 0
	}
	for _, e := range hc.streams {
		if st := e.st; !st.remoteDone && (st.stdx == nil || !st.stdx.readPaused) {
			return hc.lastIn + int64(o.readBodyTimeout)
		}
	}
	return 0
}

// arm makes the connection's timer fire by its deadline.
func (hc *h2Conn) arm() {
	if d := hc.deadline(); d != 0 && !hc.cs.c.Closed() {
		hc.cs.armAt(d)
	}
}
