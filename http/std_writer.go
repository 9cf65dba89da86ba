package http

import (
	"fmt"
	"net"
	nethttp "net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// stdWriter is the net/http.ResponseWriter of a FromStd handler. It runs
// on the handler's goroutine; everything it sends is posted to the loop.
type stdWriter struct {
	x           *stdExchange
	header      nethttp.Header
	noSniff     bool // Content-Type present (even empty) or nosniff
	status      int
	wroteHeader bool
	buf         []byte
	written     int64
	cl          int64     // the handler's Content-Length, or -1
	resp        *response // the head, filled at WriteHeader
	streaming   bool      // the head went out: writes are sent as they come
	err         error     // the connection is gone, or hijacked
	hijacked    bool
	declared    []string        // trailer names the "Trailer" field announced
	trailer     *ResponseHeader // the trailers, gathered when the handler returns; made for the first
	wdeadline   atomic.Int64    // SetWriteDeadline, UnixNano; 0: none
}

var (
	_ nethttp.ResponseWriter = (*stdWriter)(nil)
	_ nethttp.Flusher        = (*stdWriter)(nil)
	_ interface {
		SetReadDeadline(time.Time) error
		SetWriteDeadline(time.Time) error
		EnableFullDuplex() error
		FlushError() error
	} = (*stdWriter)(nil)
)

// Header implements net/http.ResponseWriter.
func (w *stdWriter) Header() nethttp.Header { return w.header }

// WriteHeader implements net/http.ResponseWriter. Informational (1xx)
// statuses are ignored, except 101 Switching Protocols, which is final
// (as in net/http) and is sent by Hijack or when the handler returns.
func (w *stdWriter) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if (code < 200 || code > 999) && code != StatusSwitchingProtocols {
		if code < 100 || code > 999 {
			panic(fmt.Sprintf("invalid WriteHeader code %v", code))
		}
		return
	}
	w.wroteHeader = true
	w.status = code
	// The head is fixed now (later header changes have no effect, as in
	// net/http): copy it into the serializer's own storage.
	w.resp.Reset(nil)
	w.resp.SetStatus(code)
	h := w.resp.Header()
	// One walk of the map copies it and finds the fields the writer
	// itself reads: a map lookup each cost 115-145 instructions (four
	// of them, 550 per request in callgrind), a string switch a few.
	// Header's methods store canonical names, so these are the keys to
	// look for (net/http's Get would canonicalize only its argument).
	var hasCT, nosniff bool
	var clv string
	var trailer []string
	for k, vs := range w.header {
		for _, v := range vs {
			h.Add(k, v)
		}
		switch k {
		case "Content-Type":
			hasCT = true // even empty: it then stays unset, unsniffed
		case "X-Content-Type-Options":
			nosniff = len(vs) > 0 && vs[0] == "nosniff"
		case "Content-Length":
			if len(vs) > 0 {
				clv = vs[0]
			}
		case "Trailer":
			trailer = vs
		}
	}
	for _, v := range trailer {
		for _, k := range strings.Split(v, ",") {
			if k = strings.TrimSpace(k); k != "" {
				w.declared = append(w.declared, nethttp.CanonicalHeaderKey(k))
			}
		}
	}
	w.noSniff = hasCT || nosniff
	if clv != "" {
		if n, err := strconv.ParseInt(clv, 10, 64); err == nil && n >= 0 {
			w.cl = n
		}
	}
}

func (w *stdWriter) bodyAllowed() bool {
	return w.status >= 200 && w.status != StatusNoContent && w.status != StatusNotModified
}

// Write implements net/http.ResponseWriter.
func (w *stdWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(StatusOK)
	}
	if w.err != nil {
		return 0, w.err
	}
	if !w.bodyAllowed() {
		return 0, nethttp.ErrBodyNotAllowed
	}
	if w.cl >= 0 && w.written+int64(len(p)) > w.cl {
		return 0, nethttp.ErrContentLength
	}
	w.written += int64(len(p))
	if w.x.head.isHead() {
		if !w.streaming {
			w.buf = append(w.buf, p...) // for Content-Length and sniffing
			if len(w.buf) > stdStreamAt {
				w.buf = w.buf[:stdStreamAt]
			}
		}
		return len(p), nil
	}
	w.buf = append(w.buf, p...)
	if len(w.buf) >= stdStreamAt {
		if err := w.send(false); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// SetReadDeadline bounds the wait for request body bytes, for
// net/http.ResponseController: a Body.Read that would wait past t fails
// with os.ErrDeadlineExceeded. A zero t removes the deadline.
func (w *stdWriter) SetReadDeadline(t time.Time) error {
	if p := w.x.pipe; p != nil {
		p.setDeadline(t)
	}
	return nil
}

// SetWriteDeadline bounds the wait for the client to take streamed
// response bytes, for net/http.ResponseController: a Write or Flush still
// waiting at t fails with os.ErrDeadlineExceeded and the connection is
// dropped, as a net/http write timeout breaks its connection. A zero t
// removes the deadline.
func (w *stdWriter) SetWriteDeadline(t time.Time) error {
	if t.IsZero() {
		w.wdeadline.Store(0)
	} else {
		w.wdeadline.Store(t.UnixNano())
	}
	return nil
}

// EnableFullDuplex lets the handler read the request body while it
// writes the response, for net/http.ResponseController. The body pipe
// always allows that, so there is nothing to switch on.
func (w *stdWriter) EnableFullDuplex() error { return nil }

// FlushError is Flush reporting the error, for
// net/http.ResponseController.
func (w *stdWriter) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(StatusOK)
	}
	return w.send(false)
}

// WriteString writes s like Write.
func (w *stdWriter) WriteString(s string) (int, error) { return w.Write([]byte(s)) }

// Flush implements net/http.Flusher: the head and the body written so far
// go to the client now; the response streams from here on.
func (w *stdWriter) Flush() {
	if !w.wroteHeader {
		w.WriteHeader(StatusOK)
	}
	_ = w.send(false)
}

// prepareHead completes the head WriteHeader filled (a sniffed
// Content-Type) and decides the framing of the response.
func (w *stdWriter) prepareHead(final bool) int64 {
	if w.bodyAllowed() && !w.noSniff && len(w.buf) > 0 {
		w.resp.Header().Set("Content-Type", nethttp.DetectContentType(w.buf))
	}
	switch {
	case !w.bodyAllowed():
		return 0
	case w.cl >= 0:
		return w.cl
	case final && len(w.declared) == 0:
		return int64(len(w.buf))
	default:
		return -1 // chunked, or delimited by closing for HTTP/1.0
	}
}

// send posts the head (the first time) and the buffered body to the loop
// and waits until the loop has taken them and the connection's output is
// below stdOutHigh: the handler cannot outrun the client.
func (w *stdWriter) send(final bool) error {
	if w.err != nil {
		return w.err
	}
	var head bool
	var cl int64
	if !w.streaming {
		head = true
		cl = w.prepareHead(false)
		w.streaming = true
	}
	data := w.buf
	if w.x.head.isHead() {
		data = nil
	}
	if len(data) == 0 && !head {
		return nil
	}
	x := w.x
	var deadline <-chan time.Time
	if dl := w.wdeadline.Load(); dl != 0 {
		d := time.Until(time.Unix(0, dl))
		if d <= 0 {
			return w.writeExpired()
		}
		t := time.NewTimer(d)
		defer t.Stop()
		deadline = t.C
	}
	errc := make(chan error, 1)
	err := x.c.Loop().Post(func() {
		if !x.current() {
			errc <- net.ErrClosed
			return
		}
		if head {
			x.writeHead(w.resp, cl)
		}
		x.ex.writeBody(data)
		x.ex.whenWritable(func(err error) { errc <- err })
	})
	if err == nil {
		select {
		case err = <-errc:
		case <-deadline:
			return w.writeExpired()
		}
	}
	w.buf = w.buf[:0]
	if err != nil {
		w.err = err
	}
	return err
}

// writeExpired breaks the connection when a write deadline passed: the
// client has not taken what was sent, and the response cannot complete.
func (w *stdWriter) writeExpired() error {
	x := w.x
	w.err = os.ErrDeadlineExceeded
	w.buf = w.buf[:0]
	_ = x.c.Loop().Post(func() {
		if x.ex.std() == x {
			x.ex.abort(os.ErrDeadlineExceeded)
		}
	})
	return w.err
}

// writeHead sends the head on the loop.
func (x *stdExchange) writeHead(resp *response, cl int64) {
	x.headSent = true
	x.ex.writeHead(resp, x.head.request(x.ex.shared()), cl)
}

// finish completes the response after the handler returned.
func (w *stdWriter) finish() {
	if !w.wroteHeader {
		w.WriteHeader(StatusOK)
	}
	x := w.x
	if w.err != nil {
		x.postDone(true)
		return
	}
	if !w.streaming {
		cl := w.prepareHead(true)
		t := w.trailersFor(cl)
		data := w.buf
		if x.head.isHead() || !w.bodyAllowed() {
			data = nil
		}
		err := x.c.Loop().Post(func() {
			if !x.current() {
				x.done(true)
				return
			}
			x.writeHead(w.resp, cl)
			x.ex.writeBody(data)
			if t != nil {
				x.ex.writeTrailers(t)
			}
			x.done(w.cl >= 0 && int64(len(data)) < w.cl && !x.head.isHead())
		})
		if err != nil {
			x.cancel()
		}
		return
	}
	if err := w.send(true); err != nil {
		x.postDone(true)
		return
	}
	short := w.cl >= 0 && w.written < w.cl && !x.head.isHead()
	t := w.trailersFor(w.cl)
	err := x.c.Loop().Post(func() {
		if t != nil && x.current() {
			x.ex.writeTrailers(t)
		}
		x.done(short)
	})
	if err != nil {
		x.cancel()
	}
}

// postDone ends the exchange without a (further) response.
func (x *stdExchange) postDone(mustClose bool) {
	if err := x.c.Loop().Post(func() { x.done(mustClose) }); err != nil {
		x.cancel()
	}
}

// panicked answers a handler's panic: 500 if nothing was sent yet, then
// the connection closes. A panic with net/http.ErrAbortHandler (abort)
// only closes it, as net/http does.
func (w *stdWriter) panicked(abort bool) {
	x := w.x
	err := x.c.Loop().Post(func() {
		x.ex.stdReturned()
		if !x.release(x.ex.stdState()) {
			return
		}
		if abort {
			x.ex.abort(nil)
			return
		}
		x.ex.shared().st.panics.Add(1)
		x.ex.fail(StatusInternalServerError) // only closes if the answer started
	})
	if err != nil {
		x.cancel()
	}
}

// trailersFor is trailers for a response of cl body bytes (negative:
// unknown). HTTP/1 sends trailers only after a chunked body, so with a
// known length they are not gathered: that walk of the header map cost
// 200 instructions per request (callgrind).
func (w *stdWriter) trailersFor(cl int64) *ResponseHeader {
	if cl >= 0 && w.x.head.major < 2 {
		return nil
	}
	return w.trailers()
}

// trailers gathers the trailer fields the handler set, in net/http's two
// ways: values of the names the "Trailer" field announced before the
// head, and keys with net/http.TrailerPrefix. nil if there are none.
func (w *stdWriter) trailers() *ResponseHeader {
	if w.trailer != nil {
		w.trailer.Reset()
	}
	for _, k := range w.declared {
		for _, v := range w.header[k] {
			w.addTrailer(k, v)
		}
	}
	for k, vs := range w.header {
		if name, ok := strings.CutPrefix(k, nethttp.TrailerPrefix); ok {
			for _, v := range vs {
				w.addTrailer(name, v)
			}
		}
	}
	if w.trailer == nil || w.trailer.Len() == 0 {
		return nil
	}
	return w.trailer
}

// addTrailer adds a trailer field. The trailer header is made for the
// first, so a response without trailers does not carry its 120 bytes.
func (w *stdWriter) addTrailer(k, v string) {
	if w.trailer == nil {
		w.trailer = new(ResponseHeader)
	}
	w.trailer.Add(k, v)
}
