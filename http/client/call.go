package client

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/veloq/veloq/http/internal/h1"
	vnet "github.com/veloq/veloq/net"
)

// A Request is what the client sends: its head is serialized into the
// upstream connection with one Write. The Client copies what it needs, so
// the caller may reuse the Request and its slices once Send returns.
type Request struct {
	Method string
	Addr   string // upstream host:port to dial (numeric: see vnet.Loop.Dial)
	TLS    bool
	Host   string  // Host field ("" = Addr)
	Target string  // request-target, origin-form "/p?q"
	Header []Field // other fields, sent as given (the caller removes hop-by-hop ones); Host, Content-Length and Transfer-Encoding are set by the client and skipped here
	Body   []byte  // whole body, or nil
	// StreamBody says the body is not in Body but produced in parts:
	// written with Call.WriteBody after Send, ended with Call.EndBody,
	// paced with Call.BodyBuffered and Call.WhenBodyWritable.
	// ContentLength announces its length; -1 means unknown (chunked on
	// HTTP/1.1, DATA frames until EndBody on HTTP/2). A call whose body
	// has begun to go out is never retried.
	StreamBody    bool
	ContentLength int64
	// Proto is the protocol to speak to Addr: ProtoHTTP1 (the zero
	// value) or ProtoHTTP2 (h2c with prior knowledge without TLS; with
	// TLS, "h2" offered by ALPN, HTTP/1.1 when the server does not pick
	// it). Requests with different Proto use different pools.
	Proto Proto
}

// A Proto is the protocol a Request is sent with.
type Proto uint8

// The protocols of Request.Proto.
const (
	ProtoHTTP1 Proto = iota // HTTP/1.1
	ProtoHTTP2              // HTTP/2 (h2c with prior knowledge, or h2 by ALPN over TLS)
)

// A Field is one header or trailer field. In what the client delivers,
// Name and Value are views valid during the callback only.
type Field struct{ Name, Value []byte }

// A ResponseHead is a response's status line and fields: views into the
// connection's input, valid during OnResponseHead only.
type ResponseHead struct {
	Status int
	Minor  int // HTTP/1.Minor
	Reason []byte
	Fields []Field
	// ContentLength is the Content-Length field's value, -1 when there is
	// none (chunked or close-delimited). For HEAD, 204 and 304 no body
	// follows, whatever it says.
	ContentLength int64
	// HTTP2 says the response came over HTTP/2 (Minor and Reason are then
	// zero). EndStream says its head ended the stream: no body and no
	// trailer follow (gRPC's Trailers-Only answers carry grpc-status here).
	HTTP2, EndStream bool
}

// A ResponseHandler receives a call's response on the loop the call was
// sent from, one method at a time. It must not block.
type ResponseHandler interface {
	// OnResponseHead delivers the head; views are valid during the call
	// only. Interim 1xx responses are skipped, except 101 Switching
	// Protocols, whose connection the handler may take with Call.Hijack.
	OnResponseHead(call *Call, resp *ResponseHead)
	// OnResponseBody delivers the next part of the body; p is valid during
	// the call only.
	OnResponseBody(call *Call, p []byte)
	// OnResponseEnd ends the call, exactly once: err is nil when the
	// response was complete (trailer holds a chunked body's trailer
	// fields, views valid during the call), otherwise an *Error saying why
	// (errors.Is ErrUpstreamClosed, ErrTimeout, ErrDial, *ProtocolError,
	// ...) and whether any response byte had arrived. The Call is not
	// valid after OnResponseEnd returns.
	OnResponseEnd(call *Call, trailer []Field, err error)
}

// A BodyForwarder is a ResponseHandler that takes the parts of an HTTP/1
// body from the upstream connection itself, to relay them without a
// copy: for a body framed by Content-Length or by the connection's
// close, the client calls OnResponseBodyFrom instead of OnResponseBody.
// The part is the next n bytes of src's input (src is the upstream
// connection, on the call's loop); the handler consumes them with
// src.ForwardTo (vhttp.Responder.WriteFrom does) or src.Discard, and
// whatever of them it leaves is discarded when it returns. It must not
// consume more. Chunked bodies and HTTP/2 go to OnResponseBody.
type BodyForwarder interface {
	OnResponseBodyFrom(call *Call, src *vnet.Conn, n int)
}

// An InformationalHandler is a ResponseHandler that also wants the
// interim 1xx responses other than 101 (100 Continue, 103 Early Hints),
// which are otherwise skipped: a proxy passes them on. The head's views
// are valid during the call only; the final response follows.
type InformationalHandler interface {
	OnInformational(call *Call, resp *ResponseHead)
}

// phase is where a call is.
type phase uint8

const (
	phaseFree    phase = iota // recycled
	phaseQueued               // waiting for a connection
	phaseWaiting              // written, waiting for the response head
	phaseBody                 // reading the body
	phaseEnding               // cancelled or failed; OnResponseEnd is on its way
)

// A Call is one request in flight, made by Send. Its methods must be
// called on the loop it was sent from; it is valid until OnResponseEnd
// returns.
type Call struct {
	ls *loopState
	up *upstream
	pc *pconn
	h  ResponseHandler
	fw BodyForwarder // h, if it is one

	buf        []byte // the serialized request, kept for a retry
	bodyAt     int    // where the body starts in buf
	headReq    bool   // HEAD: no body whatever the head says
	retryable  bool   // idempotent method, or no body
	retried    bool
	unproc     uint8 // HTTP/2: retries of a stream the upstream did not process
	started    bool  // a response byte arrived
	drain      bool  // reads a cancelled call's rest and discards it (drain.go)
	paused     bool
	ph         phase
	endErr     error
	prev, next *Call // the upstream's wait queue

	head      ResponseHead
	ph2       parsedHead
	remaining int64 // frameLength: body bytes still to come
	chunk     h1.ChunkedDecoder
	trailer   []Field

	hs h2stream // the call's stream when it goes over HTTP/2

	body bodyOut // a body produced in parts (body.go)
}

// Send sends req to req.Addr on loop l, on one of l's pooled connections
// to it or a new one, and delivers the response to h's methods on l. It
// must be called on l's goroutine (in a handler, a timer or a posted
// closure). It never blocks and never calls h before it returns: even a
// failure to start is delivered by OnResponseEnd afterwards.
func (c *Client) Send(l *vnet.Loop, req *Request, h ResponseHandler) *Call {
	ls := c.state(l)
	call := ls.newCall(h)
	if c.closed.Load() {
		ls.endLater(call, ErrClientClosed, req.Addr)
		return call
	}
	call.up = ls.upstream(req.Addr, req.TLS, req.Proto == ProtoHTTP2)
	call.up.st.requests.Add(1)
	if err := call.serialize(req); err != nil {
		ls.endLater(call, err, req.Addr)
		return call
	}
	call.up.acquire(call, false)
	return call
}

// Pause stops reading the upstream's response (backpressure): no further
// OnResponseBody until Resume. The upstream is slowed by TCP flow control.
func (call *Call) Pause() {
	if call.paused || call.ph == phaseFree {
		return
	}
	call.paused = true
	if call.hs.hc != nil {
		return // the stream's window is no longer refilled (h2.go)
	}
	if call.pc != nil {
		call.pc.c.PauseRead()
	}
}

// Resume undoes Pause: delivery goes on, from a deferred task.
func (call *Call) Resume() {
	if !call.paused || call.ph == phaseFree {
		return
	}
	call.paused = false
	if call.hs.hc != nil {
		if !call.hs.resuming {
			call.hs.resuming = true
			call.ls.loop.Defer(call.h2Resume)
		}
		return
	}
	if call.pc != nil {
		call.pc.c.ResumeRead()
	}
}

// Cancel gives the call up: OnResponseEnd follows (from a deferred task)
// with ErrCanceled, and nothing more of the response is delivered. It
// does nothing once the call has ended or is ending.
//
// On HTTP/2 the call's stream is reset. On HTTP/1 the connection is
// closed, unless the rest of the response is short: when the request
// was written whole and the response has not begun, or its body has at
// most 64 KiB to come (by Content-Length), the connection reads the
// rest, discards it and goes back to the pool (Stats.Drained). A rest
// that turns out longer, chunked or delimited by the close, or that
// does not come within a second, closes the connection then, and so
// does a request waiting for a connection (WithMaxConnsPerHost reached).
func (call *Call) Cancel() {
	if call.ph == phaseFree || call.ph == phaseEnding {
		return
	}
	call.fail(ErrCanceled)
}

// ResponseStarted reports whether any byte of the response has arrived.
func (call *Call) ResponseStarted() bool { return call.started }

// Hijack takes over the connection of a 101 (Switching Protocols)
// response, in OnResponseHead: the Client forgets it, and the caller
// serves it with its own handler (Conn.SetHandler); input that came with
// the head is presented to that handler's OnData after the callback.
// OnResponseEnd follows with a nil error. Without Hijack, a 101's
// connection is closed.
func (call *Call) Hijack() (*vnet.Conn, error) {
	pc := call.pc
	if pc == nil || call.ph != phaseWaiting || call.head.Status != 101 {
		return nil, ErrNotHijackable
	}
	pc.call = nil
	call.pc = nil
	pc.up.forget(pc)
	return pc.c, nil
}

// serialize writes req's head and body into call.buf.
func (call *Call) serialize(req *Request) error {
	if req.Addr == "" || !validToken(req.Method) || !validText(req.Target) || !validText(req.Host) ||
		len(req.Target) == 0 || req.Target[0] != '/' && req.Target != "*" && req.Method != "CONNECT" {
		return fmt.Errorf("%w: method %q, target %q", ErrInvalidRequest, req.Method, req.Target)
	}
	host := req.Host
	if host == "" {
		host = req.Addr
	}
	b := call.buf[:0]
	b = append(b, req.Method...)
	b = append(b, ' ')
	b = append(b, req.Target...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, host...)
	b = append(b, "\r\n"...)
	// Every field is checked, even one that the server's strict parser
	// delivered to a proxy: middleware may have changed Request.Headers
	// since, and a CR or LF in a name or value would split the request.
	// The checks go a word (value) or four bytes (name) at a time.
	for _, f := range req.Header {
		if !validFieldName(f.Name) || !validTextBytes(f.Value) {
			call.buf = b
			return fmt.Errorf("%w: field %q", ErrInvalidRequest, f.Name)
		}
		if framingName(f.Name) {
			continue
		}
		b = append(b, f.Name...)
		b = append(b, ": "...)
		b = append(b, f.Value...)
		b = append(b, "\r\n"...)
	}
	switch {
	case req.StreamBody && req.ContentLength < 0:
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
		call.body = bodyOut{on: true, left: -1, chunked: true}
	case req.StreamBody:
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, req.ContentLength, 10)
		b = append(b, "\r\n"...)
		call.body = bodyOut{on: true, left: req.ContentLength}
	case req.Body != nil || bodyExpected(req.Method):
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, int64(len(req.Body)), 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, "\r\n"...)
	call.bodyAt = len(b)
	b = append(b, req.Body...)
	call.buf = b
	call.headReq = req.Method == "HEAD"
	call.retryable = req.Body == nil || idempotent(req.Method)
	return nil
}

// bodyExpected: methods whose requests carry a body, so an empty one is
// sent as Content-Length: 0 (as net/http does).
func bodyExpected(m string) bool { return m == "POST" || m == "PUT" || m == "PATCH" }

// idempotent: RFC 9110 §9.2.2.
func idempotent(m string) bool {
	switch m {
	case "GET", "HEAD", "OPTIONS", "TRACE", "PUT", "DELETE":
		return true
	}
	return false
}

func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if !isTokenChar(s[i]) {
			return false
		}
	}
	return true
}

func validFieldName(b []byte) bool {
	return len(b) > 0 && h1.ClassEnd(b, 0, h1.ClassToken) == len(b)
}

// framingName: the fields the client writes itself (Host, and the body's
// framing), found by length before any compare.
func framingName(name []byte) bool {
	switch len(name) {
	case 4:
		return asciiEqualFold(name, "host")
	case 14:
		return asciiEqualFold(name, "content-length")
	case 17:
		return asciiEqualFold(name, "transfer-encoding")
	}
	return false
}

// validText: no CR, LF or NUL, which would let a value end the line or
// the head (header injection); target and Host also take no space.
func validText(s string) bool {
	for i := range len(s) {
		if c := s[i]; c <= ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

func validTextBytes(b []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; len(b) >= 8; b = b[8:] {
		w := binary.LittleEndian.Uint64(b)
		// A lane of w^c is zero where w holds c; (x - ones) &^ x & highs
		// flags every zero lane (and none where there is none: a borrow
		// only runs up from a zero lane, which is flagged anyway).
		cr, lf := w^('\r'*ones), w^('\n'*ones)
		if (w-ones)&^w&highs|(cr-ones)&^cr&highs|(lf-ones)&^lf&highs != 0 {
			return false
		}
	}
	for _, c := range b {
		if c == '\r' || c == '\n' || c == 0 {
			return false
		}
	}
	return true
}
