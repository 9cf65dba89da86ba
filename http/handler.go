package http

import (
	"context"
	"errors"
	"net"

	vnet "github.com/veloq/veloq/net"
)

// A Handler answers HTTP requests on the fast path: it runs inline on the
// connection's loop with the request as a view into the input and a
// [ResponseWriter] that buffers the answer, and must neither block nor
// keep r, r's byte slices or w after it returns. Wrap a handler that does
// heavy work with [Offloaded]; adapt a net/http handler with [FromStd];
// answer later, from the loop's callbacks, with [ResponseWriter.Detach].
//
// A panicking handler is recovered and logged; the client gets
// 500 Internal Server Error and its connection is closed.
type Handler interface {
	ServeHTTP(w *ResponseWriter, r *Request)
}

// HandlerFunc adapts a function to [Handler].
type HandlerFunc func(w *ResponseWriter, r *Request)

// ServeHTTP calls f(w, r).
func (f HandlerFunc) ServeHTTP(w *ResponseWriter, r *Request) { f(w, r) }

// A ResponseWriter collects a handler's response: status, header fields
// and body, all buffered. The server serializes it when the handler
// returns, with Date, Server, Content-Length and Connection handling
// (response.AppendTo). It allocates nothing once its buffers have
// grown to the sizes the handler uses. A handler whose answer is not
// ready when it returns (it waits for another connection, a timer)
// detaches it instead ([ResponseWriter.Detach]) and completes it later
// through a [Responder].
type ResponseWriter struct {
	resp  response
	ex    exchange  // the request's exchange; nil for a writer not made by the server
	then  then      // what the server does once the handler returns
	file  *fileBody // a body ServeFile takes from a file (fs_send.go)
	off   bool      // running on a pool worker
	raddr net.Addr
	ctx   context.Context

	// Streaming (Flush) by an offloaded handler.
	req      *Request // the request answered, for the head (and Detach's, inline)
	streamed bool     // the head went out
	serr     error    // the connection is gone

	det *Responder // made by Detach in the handler running
}

// ErrNotOffloaded is returned by [ResponseWriter.Flush] in a handler
// running inline on the loop, whose response can only leave when it
// returns.
var ErrNotOffloaded = errors.New("http: Flush is only available to offloaded handlers")

// Flush sends the status, the fields and the body written so far now,
// for an offloaded handler that produces its body bit by bit (progress,
// server-sent events, a large export): the response streams from here on,
// chunked for HTTP/1.1 (delimited by closing the connection for
// HTTP/1.0), each later Flush sending what was written since, and the
// handler's return ending it. Flush waits while the client is more than
// 256 KiB behind, so a slow reader slows the handler instead of filling
// memory; it fails once the connection is gone. An inline handler gets
// [ErrNotOffloaded]: it must not block, so it cannot wait for the client.
func (w *ResponseWriter) Flush() error {
	if !w.off || w.ex == nil || w.req == nil {
		return ErrNotOffloaded
	}
	if w.serr != nil {
		return w.serr
	}
	ex := w.ex
	c := ex.transport()
	head := !w.streamed
	body := w.resp.body
	errc := make(chan error, 1)
	err := c.Loop().Post(func() {
		if c.Closed() {
			errc <- net.ErrClosed
			return
		}
		if head {
			ex.writeHead(&w.resp, w.req, -1)
		}
		ex.writeBody(body)
		ex.whenWritable(func(err error) { errc <- err })
	})
	if err == nil {
		err = <-errc
	}
	w.streamed = true
	w.resp.body = body[:0]
	if err != nil {
		w.serr = err
	}
	return err
}

// Context returns the request's context. For a handler running off the
// loop ([Offloaded], [WithOffload]) it is canceled when the client closes,
// half-closes or resets the connection, so long work can stop early; for
// an inline handler, which must not block anyway, it is
// context.Background().
func (w *ResponseWriter) Context() context.Context {
	if w.ctx != nil {
		return w.ctx
	}
	return context.Background()
}

func (w *ResponseWriter) reset(ex exchange, body []byte) {
	w.resp.Reset(body)
	if w.file != nil {
		w.file.discard() // set by a handler that then panicked or hijacked
		w.file = nil
	}
	w.ex = ex
	w.then = then{}
}

// Hijack takes the connection away from the HTTP server once the handler
// returns: the response written so far is sent first (typically a
// 101 Switching Protocols head, written without a body), then h receives
// the connection as a TCP handler would. h.OnOpen runs at once, followed by
// h.OnData if the client sent bytes after the request; every later event
// (OnData, OnEOF when h implements it, OnClose) goes to h, and the server's
// timeouts, limits and connection count no longer apply to it. The
// connection's value (Conn.Value, Conn.SetValue) is h's to set.
//
// Only a handler running inline on the loop can hijack; an offloaded one
// gets [ErrHijackUnavailable]. As in net/http, Server.Shutdown does not
// wait for a hijacked connection (see Server.RegisterOnShutdown);
// Server.Close cuts it, as does a Shutdown whose context ends before the
// requests in progress do.
func (w *ResponseWriter) Hijack(h vnet.Handler) error {
	if h == nil {
		return errors.New("http: Hijack with a nil handler")
	}
	if w.off || w.ex == nil || !w.ex.canHijack() {
		return ErrHijackUnavailable
	}
	w.then = then{step: stepHijack, hijack: h}
	return nil
}

// Header returns the response fields for the handler to fill. Framing
// fields (Content-Length, Transfer-Encoding) are ignored; "Connection:
// close" closes the connection after the response.
func (w *ResponseWriter) Header() *ResponseHeader { return w.resp.Header() }

// WriteHeader sets the status code (default 200). It may be called any
// time before the handler returns; the last call wins.
func (w *ResponseWriter) WriteHeader(code int) { w.resp.SetStatus(code) }

// Status returns the status code set so far.
func (w *ResponseWriter) Status() int { return w.resp.Status() }

// Write appends p to the body. It never fails.
func (w *ResponseWriter) Write(p []byte) (int, error) { return w.resp.Write(p) }

// WriteString appends s to the body. It never fails.
func (w *ResponseWriter) WriteString(s string) (int, error) { return w.resp.WriteString(s) }

// Body returns the body written so far.
func (w *ResponseWriter) Body() []byte { return w.resp.Body() }

// Conn returns the connection, for a handler running inline on its loop;
// nil for an offloaded handler, which must not touch the connection.
func (w *ResponseWriter) Conn() *vnet.Conn {
	if w.off || w.ex == nil {
		return nil
	}
	if cs, ok := w.ex.(*conn); ok {
		// The answers before this request's are queued first: the handler
		// may write to the connection itself.
		cs.ls.flushPending()
	}
	return w.ex.transport()
}

// RemoteAddr returns the client's address.
func (w *ResponseWriter) RemoteAddr() net.Addr {
	if w.off || w.ex == nil {
		return w.raddr
	}
	return w.ex.transport().RemoteAddr()
}
