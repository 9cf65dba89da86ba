package client

import (
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
)

// A request body produced in parts (Request.StreamBody): the caller
// writes each part with Call.WriteBody as it has it, ends with EndBody,
// and paces itself with BodyBuffered and WhenBodyWritable, so that what
// the call holds stays bounded whatever the body's size. On HTTP/1 the
// parts go into the connection's output as they come (chunked when the
// length is unknown); on HTTP/2 they wait in the call for the peer's
// flow-control windows.

// BodyLowWater is the number of written body bytes not yet taken by the
// upstream at or below which WhenBodyWritable calls its function.
const BodyLowWater = 64 << 10

// Errors of a streamed request body.
var (
	// ErrBodyLength: the parts written do not add up to the
	// ContentLength announced.
	ErrBodyLength = errors.New("client: request body does not match its announced length")
	// ErrNoBodyStream: WriteBody or EndBody on a call whose Request did
	// not set StreamBody, or whose body ended.
	ErrNoBodyStream = errors.New("client: the call has no request body open for writing")
)

// bodyOut is a Call's streamed request body.
type bodyOut struct {
	on      bool  // Request.StreamBody
	ended   bool  // EndBody called
	direct  bool  // HTTP/1: a part went into a connection, not into buf
	left    int64 // Content-Length bytes still to write; -1: chunked
	chunked bool  // HTTP/1 framing: chunked (the length is unknown)
	wait    func(error)
	wake    func() // call.wakeBody, made once per Call
	waiting bool   // a wake-up is asked for (OnDrain or deferred)
	onConn  func() // WhenConnected's
	// trailer is EndBodyTrailer's fields as HTTP/1 field lines, each
	// with its CRLF (HTTP/2 encodes them from these).
	trailer []byte
}

// WhenConnected calls f on the loop once the call has its connection to
// the upstream: on HTTP/1 when the connection is established (for TLS,
// its handshake done), on HTTP/2 when the call's stream is opened on an
// established connection; at once if it has. f is not called if the call
// ends before (OnResponseEnd says why). A caller that writes a streamed
// body only from f keeps the call retryable when its connect fails (see
// WriteBody): nothing of the body was written, so nothing is lost. f may
// be called from within the client's own handling of the connection: it
// may write the body, but must not block. One function waits at a time.
func (call *Call) WhenConnected(f func()) {
	if call.ph == phaseFree || call.ph == phaseEnding {
		return
	}
	if call.connected() {
		f()
		return
	}
	call.body.onConn = f
}

// connected reports whether call has an established connection.
func (call *Call) connected() bool {
	if call.pc != nil {
		return call.pc.opened
	}
	hc := call.hs.hc
	return hc != nil && hc.conned && call.hs.id != 0
}

// nowConnected runs WhenConnected's function: call's connection was
// just established, or call was just given one that is.
func (call *Call) nowConnected() {
	if f := call.body.onConn; f != nil {
		call.body.onConn = nil
		f()
	}
}

// WriteBody sends p as the next part of the request body; the bytes are
// copied, so p may be reused at once. It does not wait for the upstream:
// pace a large body with BodyBuffered and WhenBodyWritable. It fails with
// ErrNoBodyStream without Request.StreamBody or after EndBody, with
// ErrBodyLength past the announced length, and with net.ErrClosed once
// the call ended or is ending.
func (call *Call) WriteBody(p []byte) error {
	if err := call.bodyOpen(); err != nil {
		return err
	}
	b := &call.body
	if b.left >= 0 {
		if int64(len(p)) > b.left {
			return ErrBodyLength
		}
		b.left -= int64(len(p))
	}
	if len(p) == 0 {
		return nil
	}
	call.retryable = false // what went out cannot be sent again
	if call.hs.hc != nil || call.up.key.h2 && call.pc == nil {
		call.buf = append(call.buf, p...)
		if hc := call.hs.hc; hc != nil && call.hs.id != 0 {
			hc.sendBody(call)
			hc.flush()
		}
		return nil
	}
	if call.pc == nil { // queued: start writes it with the head
		call.buf = call.appendPart(call.buf, p)
		return nil
	}
	b.direct = true
	c := call.pc.c
	if !b.chunked {
		_, err := c.Write(p)
		return err
	}
	var hdr [20]byte
	h := strconv.AppendInt(hdr[:0], int64(len(p)), 16)
	h = append(h, '\r', '\n')
	_, err := c.Writev([][]byte{h, p, crlf})
	return err
}

var crlf = []byte("\r\n")

// appendPart appends p to dst framed for HTTP/1.
func (call *Call) appendPart(dst, p []byte) []byte {
	if !call.body.chunked {
		return append(dst, p...)
	}
	dst = strconv.AppendInt(dst, int64(len(p)), 16)
	dst = append(dst, '\r', '\n')
	dst = append(dst, p...)
	return append(dst, '\r', '\n')
}

// EndBody ends the request body: the last chunk on HTTP/1 with chunked
// framing, END_STREAM on HTTP/2. A body shorter than its announced
// length fails the call (ErrBodyLength): the upstream could not tell
// where it ends. To give a body up, Cancel the call: its connection is
// reset (HTTP/1) or its stream (HTTP/2), so the upstream sees the
// request cut short, never complete.
func (call *Call) EndBody() error { return call.EndBodyTrailer(nil) }

// EndBodyTrailer is EndBody with trailer fields after the body: an
// HTTP/1.1 chunked body's trailer section, or an HTTP/2 HEADERS frame
// ending the stream. A body framed by Content-Length on HTTP/1.1 has no
// place for them: they are dropped, as RFC 9110 §6.5 lets a recipient
// drop trailers. The caller removes the fields that must not be sent
// (hop-by-hop and framing ones); a field with an invalid name or value
// fails with ErrInvalidRequest, nothing ended.
func (call *Call) EndBodyTrailer(trailer []Field) error {
	if err := call.bodyOpen(); err != nil {
		return err
	}
	if len(trailer) > 0 && (call.body.chunked || call.up.key.h2) {
		t := call.body.trailer[:0]
		for _, f := range trailer {
			if !validFieldName(f.Name) || !validTextBytes(f.Value) {
				return fmt.Errorf("%w: trailer field %q", ErrInvalidRequest, f.Name)
			}
			t = append(append(append(append(t, f.Name...), ':', ' '), f.Value...), '\r', '\n')
		}
		call.body.trailer = t
	}
	b := &call.body
	if b.left > 0 {
		call.fail(ErrBodyLength)
		return ErrBodyLength
	}
	b.ended = true
	switch {
	case call.hs.hc != nil || call.up.key.h2 && call.pc == nil:
		if hc := call.hs.hc; hc != nil && call.hs.id != 0 {
			hc.armHead(call)
			hc.sendBody(call)
			hc.flush()
		}
	case call.pc == nil:
		if b.chunked {
			call.buf = call.appendLastChunk(call.buf)
		}
	default:
		if b.chunked {
			if len(b.trailer) == 0 {
				_, _ = call.pc.c.Write(lastChunk)
			} else {
				_, _ = call.pc.c.Writev([][]byte{lastChunk[:3], b.trailer, crlf})
			}
		}
		call.pc.arm(call.ls.cl.o.headTimeout)
	}
	return nil
}

var lastChunk = []byte("0\r\n\r\n")

// appendLastChunk appends the chunked body's end, with its trailer.
func (call *Call) appendLastChunk(dst []byte) []byte {
	dst = append(dst, lastChunk[:3]...)
	dst = append(dst, call.body.trailer...)
	return append(dst, '\r', '\n')
}

func (call *Call) bodyOpen() error {
	switch {
	case call.ph == phaseFree || call.ph == phaseEnding:
		return net.ErrClosed
	case !call.body.on || call.body.ended:
		return ErrNoBodyStream
	}
	return nil
}

// bodySending reports whether the request's body is still being
// written: the head timeout starts at its end.
func (call *Call) bodySending() bool { return call.body.on && !call.body.ended }

// BodyBuffered returns the number of request body bytes written that the
// upstream has not taken yet: those waiting in the call (for a
// connection, or for HTTP/2 flow-control window) and the connection's
// pending output.
func (call *Call) BodyBuffered() int {
	n := len(call.buf) - call.bodyAt - call.hs.sent
	if call.pc != nil {
		n = call.pc.c.OutputBuffered()
	} else if hc := call.hs.hc; hc != nil && hc.c != nil {
		n += hc.c.OutputBuffered()
	}
	return max(n, 0)
}

// WhenBodyWritable calls f on the loop once BodyBuffered is down to
// BodyLowWater (at once, from a deferred task, if it is), with nil, or
// with net.ErrClosed once the call ended or is ending. One function waits
// at a time: a second call replaces the first. The call may come early:
// check BodyBuffered before writing much.
func (call *Call) WhenBodyWritable(f func(error)) {
	b := &call.body
	b.wait = f
	if b.wake == nil {
		b.wake = call.wakeBody
	}
	call.checkBody()
}

// checkBody arranges the wake-up of a waiting writer: deferred when the
// call is writable now or gone, on the connection's drain otherwise; an
// HTTP/2 body waiting for window is checked again by unblock.
func (call *Call) checkBody() {
	b := &call.body
	if b.wait == nil || b.waiting {
		return
	}
	l := call.ls.loop
	switch {
	case call.ph == phaseFree || call.ph == phaseEnding || call.BodyBuffered() <= BodyLowWater:
		b.waiting = true
		l.Defer(b.wake)
	case call.pc != nil:
		b.waiting = true
		call.pc.c.OnDrain(BodyLowWater, b.wake)
	case call.hs.hc != nil && call.hs.hc.c != nil && len(call.buf)-call.bodyAt-call.hs.sent <= BodyLowWater:
		b.waiting = true
		call.hs.hc.c.OnDrain(BodyLowWater, b.wake)
	}
	// Otherwise the call waits for a connection (start) or for window
	// (unblock), which check again.
}

// wakeBody calls the waiting writer's function if the call is writable,
// or waits again.
func (call *Call) wakeBody() {
	b := &call.body
	b.waiting = false
	f := b.wait
	if f == nil {
		return
	}
	if call.ph == phaseFree || call.ph == phaseEnding {
		b.wait = nil
		f(net.ErrClosed)
		return
	}
	if call.BodyBuffered() > BodyLowWater {
		call.checkBody()
		return
	}
	b.wait = nil
	f(nil)
}

// noDeadline is the HTTP/2 head deadline of a stream whose body is still
// being written: the head timeout starts at EndBody.
const noDeadline = math.MaxInt64

// reframe frames for HTTP/1 the streamed body parts an HTTP/2 call
// collected before its TLS connection fell back to HTTP/1.1.
func (call *Call) reframe() {
	b := &call.body
	if !b.on || !b.chunked {
		return
	}
	parts := append([]byte(nil), call.buf[call.bodyAt:]...)
	call.buf = call.buf[:call.bodyAt]
	if len(parts) > 0 {
		call.buf = call.appendPart(call.buf, parts)
	}
	if b.ended {
		call.buf = call.appendLastChunk(call.buf)
	}
}
