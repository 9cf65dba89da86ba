package client

// HTTP/2 to upstreams (RFC 9113): a request with Proto ProtoHTTP2 goes as
// a stream on one of its loop's HTTP/2 connections to the upstream. A
// connection carries up to the server's SETTINGS_MAX_CONCURRENT_STREAMS
// streams; past that a new one is dialed (up to WithMaxConnsPerHost),
// then requests wait in the upstream's queue. The frames and settings
// come from http/internal/h2 (shared with the server), HPACK from
// golang.org/x/net/http2/hpack. Everything runs on the connection's loop.
//
// Flow control: the connection's receive window is refilled as DATA
// arrives (what a stream may buffer is bounded by the stream's window),
// a stream's only as its body is delivered to the handler, so a paused
// call stops its upstream once the stream window is spent.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/veloq/veloq/http/internal/h1"
	"github.com/veloq/veloq/http/internal/h2"
	vnet "github.com/veloq/veloq/net"
	"golang.org/x/net/http2/hpack"
)

// ErrStreamReset: the upstream reset the call's HTTP/2 stream
// (RST_STREAM). It is wrapped with ErrUpstreamClosed.
var ErrStreamReset = errors.New("client: upstream reset the stream")

// HTTP/2 parameters of the client.
const (
	// h2StreamWindow is the receive window of each stream: what a paused
	// call may buffer before the upstream stops.
	h2StreamWindow = 256 << 10
	// h2ConnWindow is the connection's receive window.
	h2ConnWindow = 4 << 20
	// h2AssumedStreams is how many streams a connection opens before the
	// server's SETTINGS says how many it allows (RFC 9113 §6.5.2
	// recommends a limit of no less than 100).
	h2AssumedStreams = 100
	// h2MaxStreams caps the streams per connection when the server
	// announces no limit.
	h2MaxStreams  = 1000
	h2MaxStreamID = 1<<31 - 1
)

// h2stream is a Call's HTTP/2 state.
type h2stream struct {
	hc       *h2conn
	id       uint32
	sendWin  h2.Window
	recvWin  h2.Window // what the upstream may still send on the stream
	unacked  int       // delivered bytes not yet given back by WINDOW_UPDATE
	sent     int       // body bytes sent
	blocked  bool      // in hc.blocked: waiting for send window
	eosSent  bool      // END_STREAM went out (HEADERS or DATA)
	gotHead  bool
	eos      bool   // END_STREAM arrived
	held     []byte // DATA received while paused, delivered on Resume
	tbuf     []byte // a trailer kept while body is held
	resuming bool   // an h2Resume is deferred
	deadline int64  // loop clock by which the head must come (WithResponseHeaderTimeout)
}

// h2conn is an HTTP/2 connection to an upstream: the vnet handler.
type h2conn struct {
	up      *upstream
	c       *vnet.Conn
	enc     *hpack.Encoder
	encBuf  bytes.Buffer
	dec     *hpack.Decoder
	peer    h2.Settings
	sendWin h2.Window
	recvWin h2.Window
	unacked int // connection bytes received and not yet given back

	streams map[uint32]*Call
	pending []*Call // assigned, waiting for the connection to open or a stream slot
	blocked []*Call // streams with body left and no send window
	nextID  uint32
	lastID  uint32 // GOAWAY's last stream
	goaway  bool
	settled bool // the server's first SETTINGS arrived
	opened  bool // the preface went out
	conned  bool // connected (OnOpen ran)
	gone    bool
	served  bool
	idleT   *vnet.Timer
	headT   *vnet.Timer // the response-head timeout of the streams (onHeadTimer)
	headOn  bool

	out []byte // frames to write

	// The header block being received.
	blockID  uint32
	block    []byte
	blockEnd bool // its HEADERS had END_STREAM
	inBlock  bool
	fields   []hpack.HeaderField
	listSize int
	tooBig   bool
	scratch  []byte // the received fields' bytes
	hfields  []Field
	lname    []byte            // a request field's name, lowercased
	strs     map[string]string // interned request strings (intern)
}

// acquireH2 gives call a stream on a connection with room, a new
// connection, or a place in the queue.
func (u *upstream) acquireH2(call *Call) {
	if u.h1only {
		// The server spoke HTTP/1.1 when offered h2: use the HTTP/1 pool.
		call.up = u.ls.upstream(u.key.addr, u.key.tls, false)
		call.up.acquire(call, false)
		return
	}
	for _, hc := range u.h2conns {
		if hc.room() {
			if hc.opened {
				u.st.reused.Add(1)
			}
			hc.assign(call)
			return
		}
	}
	if u.open < u.ls.cl.o.maxConns {
		u.dialH2(call)
		return
	}
	u.enqueue(call)
}

func (u *upstream) dialH2(call *Call) {
	ls := u.ls
	o := &ls.cl.o
	hc := &h2conn{up: u, peer: h2.DefaultSettings, sendWin: 65535, recvWin: h2ConnWindow,
		streams: make(map[uint32]*Call), nextID: 1}
	hc.enc = hpack.NewEncoder(&hc.encBuf)
	hc.dec = hpack.NewDecoder(4096, hc.emit)
	ctx, cancel := context.WithTimeout(context.Background(), o.dialTimeout)
	var err error
	if u.key.tls {
		hc.c, err = ls.loop.DialTLS(ctx, "tcp", u.key.addr, ls.cl.tlsConfH2, hc)
	} else {
		hc.c, err = ls.loop.Dial(ctx, "tcp", u.key.addr, hc)
	}
	cancel()
	if err != nil {
		ls.endLater(call, fmt.Errorf("%w: %w", ErrDial, err), u.key.addr)
		return
	}
	u.open++
	u.st.open.Add(1)
	u.st.newConns.Add(1)
	u.h2conns = append(u.h2conns, hc)
	hc.pending = append(hc.pending, call)
	call.hs.hc = hc
	call.ph = phaseWaiting
	if !u.key.tls {
		hc.start() // prior knowledge: the preface goes out with the connect
	}
}

// room reports whether hc takes another stream.
func (hc *h2conn) room() bool {
	return !hc.goaway && !hc.gone && hc.nextID+2*uint32(len(hc.pending)) < h2MaxStreamID &&
		len(hc.streams)+len(hc.pending) < hc.maxStreams()
}

func (hc *h2conn) maxStreams() int {
	if !hc.settled {
		if m := hc.up.h2max; m > 0 {
			return m // what the server said on another connection
		}
		return h2AssumedStreams
	}
	if m := hc.peer.MaxConcurrentStreams; m > 0 && m < h2MaxStreams {
		return int(m)
	}
	return h2MaxStreams
}

// assign opens call's stream on hc, or keeps it pending until hc can.
func (hc *h2conn) assign(call *Call) {
	call.hs.hc = hc
	call.ph = phaseWaiting
	if !hc.opened || len(hc.streams) >= hc.maxStreams() {
		hc.pending = append(hc.pending, call)
		return
	}
	if hc.idleT != nil {
		hc.idleT.Stop()
	}
	hc.open(call)
	hc.flush()
}

// start sends the preface, SETTINGS and the connection window, then
// opens the pending streams.
func (hc *h2conn) start() {
	o := &hc.up.ls.cl.o
	b := append(hc.out, h2.ClientPreface...)
	b = h2.AppendSettings(b,
		h2.Setting{ID: h2.SettingEnablePush, Val: 0},
		h2.Setting{ID: h2.SettingInitialWindowSize, Val: h2StreamWindow},
		h2.Setting{ID: h2.SettingMaxHeaderListSize, Val: uint32(orDefault(o.maxHead, DefaultMaxResponseHeaderBytes))})
	hc.out = h2.AppendWindowUpdate(b, 0, h2ConnWindow-65535)
	hc.opened = true
	hc.startPending()
	hc.flush()
}

// startPending opens pending streams while there is room.
func (hc *h2conn) startPending() {
	n := 0
	for n < len(hc.pending) && len(hc.streams) < hc.maxStreams() && !hc.goaway {
		hc.open(hc.pending[n])
		n++
	}
	k := copy(hc.pending, hc.pending[n:])
	clear(hc.pending[k:])
	hc.pending = hc.pending[:k]
}

// open starts call's stream: HEADERS (and CONTINUATION) from the request
// serialized in call.buf, then as much body as the windows allow.
func (hc *h2conn) open(call *Call) {
	s := &call.hs
	s.id = hc.nextID
	hc.nextID += 2
	s.sendWin = h2.Window(hc.peer.InitialWindowSize)
	s.recvWin = h2StreamWindow
	hc.streams[s.id] = call
	hc.armHead(call)
	block, err := hc.encodeRequest(call)
	if err != nil {
		// Nothing was sent on the stream; the id is simply skipped.
		delete(hc.streams, s.id)
		s.hc = nil
		call.ls.endLater(call, err, hc.up.key.addr)
		return
	}
	body := call.buf[call.bodyAt:]
	eos := len(body) == 0 && !call.bodySending() && len(call.body.trailer) == 0
	s.eosSent = eos
	hc.out = h2.AppendHeaders(hc.out, s.id, eos, block, hc.peer.MaxFrameSize)
	if !eos {
		hc.sendBody(call)
		if hc.conned {
			call.nowConnected()
		}
	}
}

// armHead gives call's stream its response-head deadline; one timer per
// connection serves every stream, firing at the earliest deadline.
func (hc *h2conn) armHead(call *Call) {
	l := hc.up.ls.loop
	d := hc.up.ls.cl.o.headTimeout
	if call.bodySending() {
		call.hs.deadline = noDeadline // armed again at EndBody
		return
	}
	call.hs.deadline = l.Clock() + int64(d)
	if hc.headOn {
		return
	}
	hc.headOn = true
	if hc.headT == nil {
		hc.headT = l.AfterFunc(d, hc.onHeadTimer)
		return
	}
	hc.headT.Reset(d)
}

// onHeadTimer fails the streams whose head is late, and re-arms for the
// next deadline.
func (hc *h2conn) onHeadTimer() {
	hc.headOn = false
	if hc.gone && !hc.goaway {
		return
	}
	now := hc.up.ls.loop.Clock()
	var late []*Call
	next := int64(-1)
	for _, call := range hc.streams {
		switch {
		case call.hs.gotHead, call.hs.deadline == noDeadline:
		case call.hs.deadline <= now:
			late = append(late, call)
		case next < 0 || call.hs.deadline < next:
			next = call.hs.deadline
		}
	}
	for _, call := range late {
		hc.resetStream(call, h2.Cancel)
		hc.failCall(call, ErrTimeout, false)
	}
	if next >= 0 {
		hc.headOn = true
		hc.headT.Reset(time.Duration(next - now))
	}
	hc.flush()
}

// encodeRequest turns the HTTP/1.1 head in call.buf (which Send made and
// checked) into an HPACK block: pseudo-fields first, names lowercased,
// connection-specific fields dropped (RFC 9113 §8.2.2, §8.3.1).
func (hc *h2conn) encodeRequest(call *Call) ([]byte, error) {
	head := call.buf[:call.bodyAt]
	line := head[:bytes.IndexByte(head, '\n')+1]
	sp1 := bytes.IndexByte(line, ' ')
	sp2 := bytes.LastIndexByte(line, ' ')
	method, target := hc.intern(line[:sp1]), hc.intern(line[sp1+1:sp2])
	hc.encBuf.Reset()
	scheme := "http"
	if hc.up.key.tls {
		scheme = "https"
	}
	size := 0
	write := func(name, value string) {
		size += len(name) + len(value) + 32
		_ = hc.enc.WriteField(hpack.HeaderField{Name: name, Value: value})
	}
	write(":method", method)
	write(":scheme", scheme)
	rest := head[len(line) : len(head)-2]
	var authority string
	for len(rest) > 0 {
		f, r, ok := h1.NextField(rest)
		if !ok {
			break
		}
		rest = r
		if asciiEqualFold(f.Name, "host") {
			authority = hc.intern(f.Value)
			break
		}
	}
	write(":authority", authority)
	if method != "CONNECT" {
		write(":path", target)
	}
	rest = head[len(line) : len(head)-2]
	for len(rest) > 0 {
		f, r, ok := h1.NextField(rest)
		if !ok {
			break
		}
		rest = r
		if h2Dropped(f) {
			continue
		}
		write(hc.intern(hc.lower(f.Name)), hc.intern(f.Value))
	}
	if m := hc.peer.MaxHeaderListSize; m > 0 && size > int(m) {
		return nil, fmt.Errorf("%w: header list of %d bytes over the upstream's SETTINGS_MAX_HEADER_LIST_SIZE %d",
			ErrInvalidRequest, size, m)
	}
	return hc.encBuf.Bytes(), nil
}

// encodeTrailer encodes a request's trailer fields (HTTP/1 field lines,
// checked by EndBodyTrailer) as a header block, names in lowercase.
func (hc *h2conn) encodeTrailer(lines []byte) []byte {
	hc.encBuf.Reset()
	for {
		f, rest, ok := h1.NextField(lines)
		if !ok {
			break
		}
		lines = rest
		if h2Dropped(f) {
			continue
		}
		_ = hc.enc.WriteField(hpack.HeaderField{Name: string(hc.lower(f.Name)), Value: string(f.Value)})
	}
	return hc.encBuf.Bytes()
}

// lower returns name in lowercase, as HTTP/2 sends field names, in a
// buffer of hc's valid until the next call.
func (hc *h2conn) lower(name []byte) []byte {
	b := hc.lname[:0]
	for _, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	hc.lname = b
	return b
}

// Bounds of a connection's interned strings.
const (
	maxInterned    = 512
	maxInternedLen = 128
)

// intern returns b as a string, from a bounded per-connection table of
// those seen before: the HPACK encoder takes strings (and keeps those it
// indexes), and converting the same method, path, authority and fields
// for every request was 6 of BenchmarkSendOnLoopH2's 6 allocations.
func (hc *h2conn) intern(b []byte) string {
	if s, ok := hc.strs[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(b) <= maxInternedLen && len(hc.strs) < maxInterned {
		if hc.strs == nil {
			hc.strs = make(map[string]string)
		}
		hc.strs[s] = s
	}
	return s
}

// h2Dropped: fields HTTP/2 forbids (RFC 9113 §8.2.2), and Host, which
// :authority carries.
func h2Dropped(f h1.Field) bool {
	switch {
	case asciiEqualFold(f.Name, "host"), asciiEqualFold(f.Name, "connection"),
		asciiEqualFold(f.Name, "keep-alive"), asciiEqualFold(f.Name, "proxy-connection"),
		asciiEqualFold(f.Name, "transfer-encoding"), asciiEqualFold(f.Name, "upgrade"):
		return true
	case asciiEqualFold(f.Name, "te"):
		return !asciiEqualFold(f.Value, "trailers")
	}
	return false
}

// sendBody sends as much of call's body as the windows allow; the rest
// waits in hc.blocked for a WINDOW_UPDATE.
func (hc *h2conn) sendBody(call *Call) {
	s := &call.hs
	body := call.buf[call.bodyAt:]
	open := call.bodySending()
	for s.sent < len(body) {
		n := min(len(body)-s.sent, s.sendWin.Avail(), hc.sendWin.Avail(), int(hc.peer.MaxFrameSize))
		if n == 0 {
			if !s.blocked {
				s.blocked = true
				hc.blocked = append(hc.blocked, call)
			}
			break
		}
		end := s.sent+n == len(body) && !open && len(call.body.trailer) == 0
		hc.out = h2.AppendData(hc.out, s.id, end, body[s.sent:s.sent+n])
		s.eosSent = end
		s.sent += n
		s.sendWin -= h2.Window(n)
		hc.sendWin -= h2.Window(n)
	}
	if !call.body.on {
		return
	}
	if !open && !s.eosSent && s.sent == len(body) {
		if t := call.body.trailer; len(t) > 0 {
			hc.out = h2.AppendHeaders(hc.out, s.id, true, hc.encodeTrailer(t), hc.peer.MaxFrameSize)
		} else {
			hc.out = h2.AppendData(hc.out, s.id, true, nil) // EndBody after the last part went
		}
		s.eosSent = true
	}
	// A streamed body is not kept for a retry (none is made once a part
	// went): what was sent leaves the call, so it holds at most what the
	// windows hold back.
	if s.sent > 0 {
		k := copy(body, body[s.sent:])
		call.buf = call.buf[:call.bodyAt+k]
		s.sent = 0
	}
}

// unblock sends more of the bodies that waited for window.
func (hc *h2conn) unblock() {
	list := hc.blocked
	hc.blocked = hc.blocked[:0]
	for i, call := range list {
		list[i] = nil
		if call.hs.hc != hc || !call.hs.blocked {
			continue
		}
		call.hs.blocked = false
		hc.sendBody(call)
		call.checkBody()
	}
}

func (hc *h2conn) flush() {
	if len(hc.out) == 0 {
		return
	}
	_, _ = hc.c.Write(hc.out)
	hc.out = hc.out[:0]
}

// OnOpen: connected. Over TLS the server chose the protocol by ALPN.
func (hc *h2conn) OnOpen(c *vnet.Conn) {
	hc.conned = true
	if hc.up.key.tls && c.NegotiatedProtocol() != "h2" {
		hc.fallback(c)
		return
	}
	if !hc.opened {
		hc.start()
	}
	// Streams opened with the connect (h2c's prior knowledge) are now
	// connected: their streamed bodies' writers go on (WhenConnected).
	for _, call := range hc.streams {
		call.nowConnected()
	}
}

// fallback hands a TLS connection whose server did not pick h2 to the
// HTTP/1 pool, with its first pending call; the others go to that pool
// too, and later calls as well (upstream.h1only).
func (hc *h2conn) fallback(c *vnet.Conn) {
	u := hc.up
	u.h1only = true
	hc.drop()
	u1 := u.ls.upstream(u.key.addr, true, false)
	pending := hc.pending
	hc.pending = nil
	for _, call := range pending {
		call.hs = h2stream{}
		call.up = u1
		call.reframe()
	}
	if len(pending) == 0 {
		c.Close()
		return
	}
	pc := &pconn{up: u1, c: c, opened: true}
	c.SetHandler(pc)
	u1.open++
	u1.st.open.Add(1)
	pc.start(pending[0])
	for _, call := range pending[1:] {
		u1.acquire(call, false)
	}
}

// drop takes hc out of its upstream's pool; a queued call may dial.
func (hc *h2conn) drop() {
	if hc.gone {
		return
	}
	hc.gone = true
	if hc.idleT != nil {
		hc.idleT.Stop()
	}
	if hc.headT != nil && len(hc.streams) == 0 {
		hc.headT.Stop()
		hc.headOn = false
	}
	u := hc.up
	for i, x := range u.h2conns {
		if x == hc {
			u.h2conns = append(u.h2conns[:i], u.h2conns[i+1:]...)
			break
		}
	}
	u.open--
	u.st.open.Add(-1)
	if call := u.head; call != nil && u.open < u.ls.cl.o.maxConns {
		u.unqueue(call)
		u.acquireH2(call)
	}
}

// OnData reads frames.
func (hc *h2conn) OnData(c *vnet.Conn) {
	for !c.Closed() {
		in, _ := c.Peek(0)
		h, p, n, err := h2.Next(in, h2.MinMaxFrameSize)
		if err == nil && n == 0 {
			break
		}
		if err == nil {
			err = hc.frame(h, p)
		}
		c.Discard(n)
		if err != nil {
			hc.connError(err)
			return
		}
	}
	hc.flush()
}

// frame handles one frame.
func (hc *h2conn) frame(h h2.Header, p []byte) error {
	if hc.inBlock && (h.Type != h2.TypeContinuation || h.Stream != hc.blockID) {
		return h2.ConnError(h2.ProtocolError, "frame inside a header block")
	}
	switch h.Type {
	case h2.TypeData:
		return hc.onDataFrame(h, p)
	case h2.TypeHeaders:
		frag, err := h2.ParseHeaders(h, p)
		if err != nil {
			return err
		}
		hc.blockID, hc.blockEnd, hc.block = h.Stream, h.Flags.Has(h2.FlagEndStream), append(hc.block[:0], frag...)
		return hc.maybeBlockDone(h)
	case h2.TypeContinuation:
		if !hc.inBlock {
			return h2.ConnError(h2.ProtocolError, "CONTINUATION without HEADERS")
		}
		frag, err := h2.ParseContinuation(h, p)
		if err != nil {
			return err
		}
		hc.block = append(hc.block, frag...)
		return hc.maybeBlockDone(h)
	case h2.TypeRSTStream:
		code, err := h2.ParseRSTStream(h, p)
		if err != nil {
			return err
		}
		if call := hc.streams[h.Stream]; call != nil {
			retry := code == h2.RefusedStream && !call.started // RFC 9113 §8.7: not processed
			hc.endStream(call)
			hc.failCall(call, fmt.Errorf("%w: %w (%v)", ErrUpstreamClosed, ErrStreamReset, code), retry)
		}
	case h2.TypeSettings:
		return hc.onSettings(h, p)
	case h2.TypePing:
		data, err := h2.ParsePing(h, p)
		if err != nil {
			return err
		}
		if !h.Flags.Has(h2.FlagAck) {
			hc.out = h2.AppendPing(hc.out, true, data)
		}
	case h2.TypeGoAway:
		last, _, _, err := h2.ParseGoAway(h, p)
		if err != nil {
			return err
		}
		hc.onGoAway(last)
	case h2.TypeWindowUpdate:
		inc, err := h2.ParseWindowUpdate(h, p)
		if err != nil {
			var e *h2.Error
			if errors.As(err, &e) && e.Stream != 0 {
				if call := hc.streams[h.Stream]; call != nil {
					hc.resetStream(call, e.Code)
					hc.failCall(call, protoErr(e.Reason), false)
				}
				return nil
			}
			return err
		}
		if h.Stream == 0 {
			if err := hc.sendWin.Add(0, int64(inc)); err != nil {
				return err
			}
		} else if call := hc.streams[h.Stream]; call != nil {
			if err := call.hs.sendWin.Add(h.Stream, int64(inc)); err != nil {
				return err
			}
		}
		hc.unblock()
	case h2.TypePushPromise:
		return h2.ConnError(h2.ProtocolError, "PUSH_PROMISE with push disabled")
	}
	return nil
}

// onSettings applies the server's SETTINGS and acknowledges them.
func (hc *h2conn) onSettings(h h2.Header, p []byte) error {
	if h.Flags.Has(h2.FlagAck) {
		return h2.ParseSettings(h, p, nil)
	}
	oldWin := hc.peer.InitialWindowSize
	err := h2.ParseSettings(h, p, hc.peer.Apply)
	if err != nil {
		return err
	}
	if d := int64(hc.peer.InitialWindowSize) - int64(oldWin); d != 0 {
		for id, call := range hc.streams {
			if err := call.hs.sendWin.Add(id, d); err != nil {
				return h2.ConnError(h2.FlowControlError, "stream window over 2^31-1")
			}
		}
	}
	hc.enc.SetMaxDynamicTableSizeLimit(hc.peer.HeaderTableSize)
	hc.out = h2.AppendSettingsAck(hc.out)
	hc.settled = true
	hc.up.h2max = hc.maxStreams()
	hc.startPending()
	hc.unblock()
	hc.feedQueue()
	return nil
}

// feedQueue gives queued calls streams on hc while it has room.
func (hc *h2conn) feedQueue() {
	u := hc.up
	for u.head != nil && hc.room() && hc.opened {
		call := u.head
		u.unqueue(call)
		u.st.reused.Add(1)
		call.hs.hc = hc
		call.ph = phaseWaiting
		hc.open(call)
	}
}

// onGoAway: no new streams on hc; streams above last were not processed
// and go to another connection (RFC 9113 §6.8: safe whatever the method).
func (hc *h2conn) onGoAway(last uint32) {
	hc.goaway = true
	hc.lastID = last
	var retry []*Call
	for id, call := range hc.streams {
		if id > last {
			retry = append(retry, call)
		}
	}
	retry = append(retry, hc.pending...)
	hc.pending = nil
	for _, call := range retry {
		// Unprocessed, so safe to retry whatever the method.
		hc.failCall(call, fmt.Errorf("%w: GOAWAY", ErrUpstreamClosed), true)
	}
	hc.drop()
	if len(hc.streams) == 0 {
		hc.flush()
		hc.c.Close()
	}
}

// onDataFrame delivers a DATA frame's data, or holds it while paused.
func (hc *h2conn) onDataFrame(h h2.Header, p []byte) error {
	if err := hc.recvWin.Take(0, len(p)); err != nil {
		return err
	}
	data, err := h2.ParseData(h, p)
	if err != nil {
		return err
	}
	hc.giveBack(len(p)) // the connection's window: see the file's comment
	call := hc.streams[h.Stream]
	if call == nil || !call.hs.gotHead {
		if call != nil {
			hc.resetStream(call, h2.ProtocolError)
			hc.failCall(call, protoErr("DATA before the response head"), false)
		}
		return nil // a stream ended or cancelled: its late data is dropped
	}
	s := &call.hs
	if err := s.recvWin.Take(s.id, len(p)); err != nil {
		hc.resetStream(call, h2.FlowControlError)
		hc.failCall(call, protoErr("DATA beyond the stream window"), false)
		return nil
	}
	s.unacked += len(p) - len(data) // padding is consumed at once
	s.eos = h.Flags.Has(h2.FlagEndStream)
	if call.paused || len(s.held) > 0 {
		s.held = append(s.held, data...)
		if s.eos {
			hc.endStream(call)
			s.hc = hc // kept for Resume's delivery
		}
		return nil
	}
	if len(data) > 0 {
		call.h.OnResponseBody(call, data)
		if s.hc != hc {
			return nil // cancelled in the callback
		}
		s.unacked += len(data)
	}
	if s.eos {
		hc.endStream(call)
		hc.finish(call, nil)
		return nil
	}
	hc.ackStream(call)
	return nil
}

// giveBack returns n bytes of the connection's receive window, in
// WINDOW_UPDATEs of at least half the window.
func (hc *h2conn) giveBack(n int) {
	hc.unacked += n
	if hc.unacked >= h2ConnWindow/2 {
		hc.out = h2.AppendWindowUpdate(hc.out, 0, uint32(hc.unacked))
		hc.recvWin += h2.Window(hc.unacked)
		hc.unacked = 0
	}
}

// ackStream refills call's stream window once half of it was delivered.
func (hc *h2conn) ackStream(call *Call) {
	s := &call.hs
	if s.unacked >= h2StreamWindow/2 && !s.eos {
		hc.out = h2.AppendWindowUpdate(hc.out, s.id, uint32(s.unacked))
		s.recvWin += h2.Window(s.unacked)
		s.unacked = 0
	}
}

// h2Resume delivers what arrived while the call was paused, then lets the
// upstream go on (Resume's deferred task).
func (call *Call) h2Resume() {
	s := &call.hs
	hc := s.hc
	if !s.resuming {
		return // a stale task: the call it was deferred for ended
	}
	s.resuming = false
	if hc == nil || call.paused || call.ph == phaseFree || call.ph == phaseEnding {
		return
	}
	if len(s.held) > 0 {
		held := s.held
		call.h.OnResponseBody(call, held)
		if s.hc != hc {
			return
		}
		s.unacked += len(held)
		s.held = held[:0]
		if call.paused {
			// Paused again in the callback: what was held is delivered,
			// the window still not given back.
			hc.flush()
			return
		}
	}
	if s.eos {
		var trailer []Field
		if s.tbuf != nil {
			trailer = call.trailer
		}
		hc.finish(call, trailer)
		hc.flush()
		return
	}
	hc.ackStream(call)
	hc.flush()
}

// maybeBlockDone decodes a header block once its last frame arrived.
func (hc *h2conn) maybeBlockDone(h h2.Header) error {
	if !h.Flags.Has(h2.FlagEndHeaders) {
		hc.inBlock = true
		if len(hc.block) > 2*orDefault(hc.up.ls.cl.o.maxHead, DefaultMaxResponseHeaderBytes) {
			return h2.ConnError(h2.EnhanceYourCalm, "header block over the limit")
		}
		return nil
	}
	hc.inBlock = false
	hc.fields = hc.fields[:0]
	hc.listSize, hc.tooBig = 0, false
	hc.dec.SetEmitEnabled(true)
	if _, err := hc.dec.Write(hc.block); err != nil {
		return h2.ConnError(h2.CompressionError, err.Error())
	}
	if err := hc.dec.Close(); err != nil {
		return h2.ConnError(h2.CompressionError, err.Error())
	}
	call := hc.streams[hc.blockID]
	if call == nil {
		return nil // a stream ended or cancelled
	}
	if hc.tooBig {
		hc.resetStream(call, h2.ProtocolError)
		hc.failCall(call, protoErr("response head larger than the limit"), false)
		return nil
	}
	return hc.onHeaders(call)
}

// emit collects a decoded field, counting the list's size as
// SETTINGS_MAX_HEADER_LIST_SIZE does (name, value and 32 per field).
func (hc *h2conn) emit(f hpack.HeaderField) {
	hc.listSize += int(f.Size())
	if hc.listSize > orDefault(hc.up.ls.cl.o.maxHead, DefaultMaxResponseHeaderBytes) ||
		len(hc.fields) >= orDefault(hc.up.ls.cl.o.maxFields, DefaultMaxResponseFields) {
		hc.tooBig = true
		hc.dec.SetEmitEnabled(false)
		return
	}
	hc.fields = append(hc.fields, f)
}

// onHeaders handles a response head, an interim one or a trailer.
func (hc *h2conn) onHeaders(call *Call) error {
	s := &call.hs
	call.started = true
	hc.served = true
	if s.gotHead {
		if !hc.blockEnd {
			hc.resetStream(call, h2.ProtocolError)
			hc.failCall(call, protoErr("trailer without END_STREAM"), false)
			return nil
		}
		trailer, ok := hc.viewFields(call, false)
		if !ok {
			hc.resetStream(call, h2.ProtocolError)
			hc.failCall(call, protoErr("malformed trailer field"), false)
			return nil
		}
		s.eos = true
		hc.endStream(call)
		if call.paused || len(s.held) > 0 {
			// Kept for Resume: copy the views.
			s.tbuf = s.tbuf[:0]
			for _, f := range trailer {
				s.tbuf = append(s.tbuf, f.Name...)
				s.tbuf = append(s.tbuf, f.Value...)
			}
			off := 0
			for i := range trailer {
				n, v := len(trailer[i].Name), len(trailer[i].Value)
				trailer[i] = Field{Name: s.tbuf[off : off+n], Value: s.tbuf[off+n : off+n+v]}
				off += n + v
			}
			call.trailer = trailer
			s.hc = hc
			return nil
		}
		hc.finish(call, trailer)
		return nil
	}
	rh := &call.head
	rh.Status, rh.ContentLength, rh.HTTP2, rh.EndStream, rh.Minor, rh.Reason = 0, -1, true, false, 0, nil
	for _, f := range hc.fields {
		if f.Name == ":status" {
			st, err := strconv.Atoi(f.Value)
			if err != nil || len(f.Value) != 3 || st < 100 {
				break
			}
			rh.Status = st
		}
	}
	fields, ok := hc.viewFields(call, true)
	if rh.Status == 0 || !ok {
		hc.resetStream(call, h2.ProtocolError)
		hc.failCall(call, protoErr("malformed HTTP/2 response head"), false)
		return nil
	}
	rh.Fields = fields
	for _, f := range fields {
		if string(f.Name) == "content-length" {
			n, err := strconv.ParseInt(string(f.Value), 10, 64)
			if err != nil || n < 0 {
				hc.resetStream(call, h2.ProtocolError)
				hc.failCall(call, protoErr("malformed content-length"), false)
				return nil
			}
			rh.ContentLength = n
		}
	}
	if rh.Status < 200 {
		if hc.blockEnd {
			hc.resetStream(call, h2.ProtocolError)
			hc.failCall(call, protoErr("interim response with END_STREAM"), false)
			return nil
		}
		if ih, ok := call.h.(InformationalHandler); ok && rh.Status != 101 {
			ih.OnInformational(call, rh)
		}
		return nil
	}
	if hc.blockEnd && rh.ContentLength < 0 && !call.headReq {
		// END_STREAM on the head: the body is empty, and saying so lets a
		// proxy's HTTP/2 front end its stream in the head too (gRPC's
		// Trailers-Only answers carry grpc-status there).
		rh.ContentLength = 0
	}
	rh.EndStream = hc.blockEnd
	s.gotHead = true
	call.ph = phaseBody
	call.h.OnResponseHead(call, rh)
	if s.hc != hc {
		return nil // cancelled in the callback
	}
	if hc.blockEnd {
		s.eos = true
		hc.endStream(call)
		hc.finish(call, nil)
	}
	return nil
}

// viewFields copies the decoded fields into hc's scratch and returns
// views of them (no pseudo-fields; a pseudo-field in a trailer or an
// unknown one is malformed).
func (hc *h2conn) viewFields(call *Call, head bool) ([]Field, bool) {
	b := hc.scratch[:0]
	for _, f := range hc.fields {
		if f.Name == "" {
			return nil, false
		}
		if f.Name[0] == ':' {
			if !head || f.Name != ":status" {
				return nil, false
			}
			continue
		}
		b = append(b, f.Name...)
		b = append(b, f.Value...)
	}
	hc.scratch = b
	out := hc.hfields[:0]
	if !head {
		out = call.trailer[:0]
	}
	off := 0
	for _, f := range hc.fields {
		if f.Name[0] == ':' {
			continue
		}
		n, v := len(f.Name), len(f.Value)
		out = append(out, Field{Name: b[off : off+n : off+n], Value: b[off+n : off+n+v : off+n+v]})
		off += n + v
	}
	if head {
		hc.hfields = out
	} else {
		call.trailer = out
	}
	return out, true
}

// endStream takes call's stream off hc (it stays the call's hc until
// the call ends) and lets a waiting call have the slot.
func (hc *h2conn) endStream(call *Call) {
	s := &call.hs
	if s.id != 0 && hc.streams[s.id] == call {
		delete(hc.streams, s.id)
	} else {
		for i, p := range hc.pending {
			if p == call {
				hc.pending = append(hc.pending[:i], hc.pending[i+1:]...)
				break
			}
		}
	}
	s.hc = nil
	if hc.gone {
		if hc.goaway && len(hc.streams) == 0 && hc.c != nil {
			hc.flush()
			hc.c.Close()
		}
		return
	}
	hc.startPending()
	hc.feedQueue()
	if len(hc.streams) == 0 && len(hc.pending) == 0 {
		hc.armIdle()
	}
}

// armIdle closes hc after the idle timeout without streams.
func (hc *h2conn) armIdle() {
	d := hc.up.ls.cl.o.idleTimeout
	if hc.idleT == nil {
		hc.idleT = hc.up.ls.loop.AfterFunc(d, hc.onIdle)
		return
	}
	hc.idleT.Reset(d)
}

func (hc *h2conn) onIdle() {
	if !hc.gone && len(hc.streams) == 0 && len(hc.pending) == 0 {
		hc.drop()
		hc.c.Close()
	}
}

// finish ends call after its whole response.
func (hc *h2conn) finish(call *Call, trailer []Field) {
	call.hs.hc = nil
	call.end(trailer, nil)
}

// resetStream sends RST_STREAM for call's stream.
func (hc *h2conn) resetStream(call *Call, code h2.ErrCode) {
	if call.hs.id != 0 && hc.streams[call.hs.id] == call {
		hc.out = h2.AppendRSTStream(hc.out, call.hs.id, code)
	}
	hc.endStream(call)
}

// maxUnprocessed bounds the retries of a call whose stream the upstream
// did not process (REFUSED_STREAM, above a GOAWAY's last stream): safe
// whatever the method, but not to go round forever.
const maxUnprocessed = 3

// failCall ends call with err, or retries it (retry: the upstream did not
// process it).
func (hc *h2conn) failCall(call *Call, err error, retry bool) {
	hc.endStream(call)
	call.hs = h2stream{}
	if retry && call.unproc < maxUnprocessed && (!call.body.on || call.retryable) {
		call.unproc++
		call.up.st.retries.Add(1)
		call.up.acquireH2(call)
		return
	}
	call.connFailed(err, hc.served)
}

// cancel is Call.Cancel on an HTTP/2 call: RST_STREAM CANCEL, the
// connection goes on.
func (hc *h2conn) cancel(call *Call) {
	hc.resetStream(call, h2.Cancel)
	call.hs = h2stream{}
	if !hc.gone || hc.goaway {
		hc.flush()
	}
}

// connError ends hc after a protocol error: GOAWAY, close, and its calls
// fail.
func (hc *h2conn) connError(err error) {
	code := h2.ProtocolError
	var e *h2.Error
	if errors.As(err, &e) {
		code = e.Code
	}
	hc.out = h2.AppendGoAway(hc.out, 0, code, nil)
	hc.flush()
	hc.closeWith(protoErr(err.Error()))
	hc.c.Close()
}

// closeWith fails every call on hc.
func (hc *h2conn) closeWith(err error) {
	hc.drop()
	calls := make([]*Call, 0, len(hc.streams)+len(hc.pending))
	for _, call := range hc.streams {
		calls = append(calls, call)
	}
	calls = append(calls, hc.pending...)
	clear(hc.streams)
	hc.pending = nil
	for _, call := range calls {
		call.hs = h2stream{}
		call.connFailed(err, hc.served)
	}
}

// OnClose: the connection is gone; its calls fail (or retry).
func (hc *h2conn) OnClose(c *vnet.Conn, err error) {
	switch {
	case !hc.conned:
		err = fmt.Errorf("%w: %w", ErrDial, err)
	case err == nil:
		err = ErrUpstreamClosed
	case !errors.Is(err, ErrTimeout):
		err = fmt.Errorf("%w: %w", ErrUpstreamClosed, err)
	}
	hc.closeWith(err)
}

// closeIdleH2 closes HTTP/2 connections without streams (Client.Close).
func (u *upstream) closeIdleH2() {
	for _, hc := range append([]*h2conn(nil), u.h2conns...) {
		if len(hc.streams) == 0 && len(hc.pending) == 0 {
			hc.drop()
			hc.c.Close()
		}
	}
}
