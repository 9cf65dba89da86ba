package http

import (
	"errors"
	"io"
	"math"

	"github.com/veloq/veloq/http/internal/h1"
)

// StreamBody returns a handler that serves h with request bodies streamed
// instead of collected: h runs as soon as a request's head has arrived,
// with req.Body nil (HasBody says whether a body follows), and reads the
// body on the loop, in parts, through its detached answer
// ([Responder.OnBody]). What the server holds for such a request stays
// bounded whatever the body's size: on HTTP/1 it stops reading the
// connection while the reader is paused ([Responder.PauseBody]), on
// HTTP/2 it gives the stream's flow-control window back only as the
// reader takes the bytes.
//
// maxBytes bounds the body: an HTTP/1 Content-Length above it is
// answered 413 before h runs, and a body that grows past it ends with an
// error to OnBody (errors.Is [ErrBodyTooLarge]). maxBytes <= 0 means no
// limit; the server's [Limits.MaxBodyBytes] does not apply.
//
// It takes effect where the server can see it from a request's head,
// before the body: as the server's handler (the one given to NewServer),
// as a [Router] route's handler (other routes keep their bodies
// collected, under [Limits.MaxBodyBytes]), and below middleware applied
// with [Chain], at any depth of these. Elsewhere (below a middleware
// applied by hand) the server collects the body as for any handler, and
// OnBody reports only its end. A request h answers without Detach, or
// whose body it never asks for, is answered, and its HTTP/1 connection
// then closes, since the unread body stands between it and the next
// request.
func StreamBody(h Handler, maxBytes int64) Handler {
	if maxBytes <= 0 {
		maxBytes = math.MaxInt64
	}
	return &bodyStreamer{h: h, max: maxBytes}
}

// bodyStreamer is StreamBody's handler.
type bodyStreamer struct {
	h   Handler
	max int64
}

func (s *bodyStreamer) ServeHTTP(w *ResponseWriter, r *Request) { s.h.ServeHTTP(w, r) }

// A headRouter is a handler that can tell from a request's head alone
// whether the handler that will serve it streams the body (StreamBody),
// and with which limit. The server asks its root handler, when it is one,
// before it collects a body: the answer must not depend on anything the
// handlers do, only on the request.
type headRouter interface {
	streamLimit(req *Request) (maxBytes int64, ok bool)
}

func (s *bodyStreamer) streamLimit(*Request) (int64, bool) { return s.max, true }

// chained is what Chain returns when the handler it wraps is a
// headRouter, so that middleware does not hide a streamed route.
type chained struct {
	h     Handler    // the middleware around inner
	inner headRouter // the wrapped handler
}

func (c *chained) ServeHTTP(w *ResponseWriter, r *Request) { c.h.ServeHTTP(w, r) }

func (c *chained) streamLimit(req *Request) (int64, bool) { return c.inner.streamLimit(req) }

// ErrBodyAborted is what [Responder.OnBody] reports when the request body
// can no longer be completed: the client closed its connection, half-closed
// it or reset the HTTP/2 stream before the body's end.
var ErrBodyAborted = errors.New("http: request body aborted by the client")

// bodyStream is a detached answer's request body, streamed to OnBody.
type bodyStream struct {
	state      uint8
	streamed   bool // the protocol streams the body (Detach under StreamBody)
	expect100  bool
	paused     bool // PauseBody
	readPaused bool // the protocol stopped taking bytes for the reader
	resuming   bool // a deferred deliver is on its way
	ended      bool // the protocol ended the body (endErr says how)
	endErr     error
	fn         func(part []byte, end bool, err error)
	held       []byte // parts that arrived while the reader was paused
	// trailer holds the body's trailer fields, copied when the protocol
	// ends the body (BodyTrailer).
	trailer ResponseHeader
}

// The states of a bodyStream.
const (
	bodyNone    uint8 = iota // no streamed body
	bodyUnread               // a body follows; OnBody was not called yet
	bodyReading              // OnBody called: parts flow
	bodyOver                 // the end was delivered
)

// maxKeptHeld bounds the holding buffer a detached state keeps for reuse.
const maxKeptHeld = 64 << 10

// OnBody starts reading the request body of a [StreamBody] handler's
// request: f is called on the loop with each part as it arrives (part is
// valid during the call only), then once more with end set, and err nil
// if the body was complete, or the reason it is not (a malformed chunked
// body, [ErrBodyTooLarge], [ErrBodyReadTimeout], [ErrBodyAborted]); an
// incomplete body never ends with a nil err. A request without a body
// gets the end at once (from a deferred task, never inside OnBody). A
// client waiting on "Expect: 100-continue" is told to send the body now,
// as net/http tells it when the handler first reads.
//
// f must not block: to slow the client, call PauseBody (in f or later),
// and ResumeBody when ready for more. Only the first call counts; a
// Responder whose answer ended, or a request whose body the server
// collected (the handler not under StreamBody), gets its end (err nil, no
// parts: the collected body is req.Body).
func (r *Responder) OnBody(f func(part []byte, end bool, err error)) {
	d := r.live()
	if d == nil {
		return
	}
	b := &d.body
	if b.fn != nil {
		return
	}
	b.fn = f
	if b.state == bodyUnread {
		b.state = bodyReading
		d.ex.askBody(b.expect100 && !d.headSent)
		if !d.inHandler {
			d.ex.bodyDrained() // take the bytes that wait (run does it otherwise)
		}
		return
	}
	if b.state == bodyNone {
		b.state, b.ended, b.endErr = bodyReading, true, io.EOF
	}
	d.deliverLater()
}

// PauseBody stops the parts of the request body until ResumeBody: the
// server stops reading the client's connection (HTTP/1) or withholds the
// stream's flow-control window (HTTP/2), so the client's TCP or HTTP/2
// window closes. At most what had arrived when it took effect is held
// (one read, or one stream window: 64 KiB).
func (r *Responder) PauseBody() {
	if d := r.live(); d != nil {
		d.body.paused = true
	}
}

// ResumeBody undoes PauseBody: what was held is delivered (from a deferred
// task, not inside this call), then the server reads on.
func (r *Responder) ResumeBody() {
	d := r.live()
	if d == nil || !d.body.paused {
		return
	}
	d.body.paused = false
	d.deliverLater()
}

// BodyPaused reports whether PauseBody holds the request body.
func (r *Responder) BodyPaused() bool {
	d := r.live()
	return d != nil && d.body.paused
}

func (d *detached) deliverLater() {
	if !d.body.resuming {
		d.body.resuming = true
		d.loop.Defer(d.deliverFn)
	}
}

// write is the protocol's: the next part of the body. It reports whether
// the reader is behind (paused, or with parts held), so that the protocol
// stops taking more.
func (d *detached) write(p []byte) bool {
	b := &d.body
	if b.state == bodyNone || b.state == bodyOver || b.ended {
		return true // the answer or the body ended: the rest is not wanted
	}
	if b.paused || len(b.held) > 0 || b.fn == nil || b.state != bodyReading {
		b.held = append(b.held, p...)
		return true
	}
	b.fn(p, false, nil)
	return b.paused
}

// closeWrite is the protocol's: the body ended, complete with io.EOF.
func (d *detached) closeWrite(err error) {
	b := &d.body
	if b.ended || b.state == bodyNone || b.state == bodyOver {
		return
	}
	b.ended, b.endErr = true, err
	if !b.paused && len(b.held) == 0 && b.fn != nil {
		d.deliver()
	}
}

// deliver gives the reader what waits for it: the parts held, then the
// end, unless it pauses meanwhile; then the protocol reads on.
func (d *detached) deliver() {
	b := &d.body
	b.resuming = false
	if d.ex == nil || b.fn == nil || b.state != bodyReading {
		return
	}
	if len(b.held) > 0 && !b.paused {
		held := b.held
		b.held = nil
		b.fn(held, false, nil)
		if d.ex == nil {
			return
		}
		b.held = held[:0]
	}
	if b.paused {
		return
	}
	if b.ended {
		b.state = bodyOver
		err := b.endErr
		if err == io.EOF {
			err = nil
		}
		b.fn(nil, true, err)
		return
	}
	if b.readPaused {
		d.ex.bodyDrained() // the protocol clears readPaused
	}
}

// bodyComplete reports whether the request's body was read to its end,
// so that its connection may carry the next request.
func (d *detached) bodyComplete() bool {
	b := &d.body
	return b.state == bodyNone || b.ended && b.endErr == io.EOF
}

// bodyGone tells a reader whose body did not end that it never will.
func (d *detached) bodyGone() {
	b := &d.body
	if b.state == bodyReading && !b.ended && b.fn != nil {
		b.state = bodyOver
		b.fn(nil, true, ErrBodyAborted)
	}
}

// resetBody forgets the body of an ended answer.
func (b *bodyStream) reset() {
	held := b.held[:0]
	if cap(held) > maxKeptHeld {
		held = nil
	}
	tr := b.trailer
	tr.Reset()
	*b = bodyStream{held: held, trailer: tr}
}

// BodyTrailer returns the trailer fields of the request body that
// [Responder.OnBody] reported complete: an HTTP/1 chunked body's trailer
// section, an HTTP/2 stream's trailing HEADERS. It is nil before the end
// was delivered, and when the body had no trailer. The fields are the
// Responder's, valid until its answer ends: read them, do not keep them.
func (r *Responder) BodyTrailer() []HeaderField {
	d := r.live()
	if d == nil || d.body.state != bodyOver || d.body.trailer.Len() == 0 {
		return nil
	}
	return d.body.trailer.Fields()
}

// setTrailer is the protocol's, before it ends the body complete: the
// HTTP/1 trailer section's field lines (validated by the decoder).
func (d *detached) setTrailer(lines []byte) {
	eachField(lines, d.body.trailer.AddBytes)
}

// eachField calls f with the name and value of each field line in
// lines, an HTTP/1 trailer section the decoder validated.
func eachField(lines []byte, f func(name, value []byte)) {
	for {
		fl, rest, ok := h1.NextField(lines)
		if !ok {
			return
		}
		lines = rest
		f(fl.Name, fl.Value)
	}
}
