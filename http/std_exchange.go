package http

import (
	"bytes"
	"context"
	"io"
	"net"
	nethttp "net/http"
	"net/url"

	vnet "github.com/veloq/veloq/net"
)

// stdExchange is one FromStd request in progress, over any protocol's
// exchange. The loop owns the fields marked "loop"; the handler's
// goroutine owns the writer; they meet in the body pipe and in closures
// posted to the loop.
//
// Its life: the protocol makes it (newStdExchange) and makes it its
// current FromStd request (exchange.setStd); the handler runs off the
// loop (run); body bytes reach it through the pipe, fed by the protocol;
// the writer posts the head and body parts to the loop; done, posted when
// the handler returns, gives the buffers back and ends the exchange.
// Anything posted checks current() first: the connection may have closed
// or moved on meanwhile.
type stdExchange struct {
	sh   *stdHandler
	ex   exchange
	srv  *Server
	c    *vnet.Conn
	ctx  reqContext // the request's context, canceled by cancel
	url  url.URL    // the request's URL, for stdRequest
	req  *nethttp.Request
	head stdHead // what serializing the response head needs of the request
	pipe *bodyPipe
	w    stdWriter

	// loop
	bodyDone  bool
	expect100 bool
	headSent  bool
	// readPaused is set while the protocol stopped taking body bytes from
	// the client because the handler did not keep up: the body timeout
	// does not run meanwhile.
	readPaused bool
	// continued is set once the handler asked for the body of an
	// Expect: 100-continue request: until then the client waits for us,
	// and the body timeout does not run.
	continued bool
	// chained is set when a fast handler chain called the handler (it is
	// not the server's root).
	chained bool
}

// stdHead is what serializing a response head needs of its request:
// the method (HEAD has no body), the version and Close. The exchange
// keeps these instead of a whole Request (472 bytes), which made it a
// 896-byte allocation per request; the loop fills its own Request from
// them when the head goes out (request).
type stdHead struct {
	method       []byte // interned: outlives the input buffer
	major, minor uint8
	close        bool
}

func (h *stdHead) isHead() bool { return string(h.method) == "HEAD" }

// request fills ls's scratch Request with h, for the protocol's
// writeHead, which reads it (and may set Close) but keeps no reference.
func (h *stdHead) request(ls *loopState) *Request {
	r := &ls.stdReq
	r.Method, r.ProtoMajor, r.ProtoMinor, r.Close = h.method, int(h.major), int(h.minor), h.close
	return r
}

// stdConn is a connection's FromStd state, made for its first FromStd
// request.
type stdConn struct {
	// x is an HTTP/1 connection's FromStd request in progress (kept here,
	// not in the conn every connection pays for).
	x     *stdExchange
	ctx   context.Context // base of request contexts, made once
	raddr string          // the peer's address as net/http shows it
	// The writer's head and body buffers, kept for the next request
	// between exchanges.
	resp *response
	buf  []byte
}

func newStdConn(srv *Server, c *vnet.Conn) *stdConn {
	return &stdConn{
		// What net/http puts in every request's context.
		ctx: context.WithValue(context.WithValue(context.Background(),
			nethttp.ServerContextKey, srv.stdSrv), nethttp.LocalAddrContextKey, c.LocalAddr()),
		raddr: c.RemoteAddr().String(),
	}
}

// newStdExchange makes the exchange of a FromStd request whose head was
// just parsed, before the protocol attaches its body. With a non-nil w,
// sh is not the root: a fast handler chain called it on the loop through
// w, the body was collected (req.Body, copied here), and the fields the
// chain set on w are the response's first fields.
func newStdExchange(ex exchange, sc *stdConn, sh *stdHandler, req *Request, w *ResponseWriter) (*stdExchange, error) {
	ls := ex.shared()
	c := ex.transport()
	x := &stdExchange{sh: sh, ex: ex, srv: ls.srv, c: c}
	x.ctx.Context = sc.ctx
	sreq, err := stdRequest(&x.ctx, req, sc.raddr, &ls.hdrScratch, &x.url)
	if err != nil {
		return nil, err
	}
	sreq.TLS = c.TLS() // nil in plaintext, as net/http
	x.req = sreq
	_, mb := internMethod(req.Method)
	x.head = stdHead{method: mb, major: uint8(max(req.ProtoMajor, 1)), minor: uint8(req.ProtoMinor), close: req.Close}
	x.w = stdWriter{x: x, header: make(nethttp.Header), cl: -1, resp: sc.resp, buf: sc.buf}
	sc.resp, sc.buf = nil, nil
	if x.w.resp == nil {
		x.w.resp = new(response)
	}
	if w == nil {
		return x, nil
	}
	x.chained = true
	for _, p := range req.params[:req.nparams] {
		sreq.SetPathValue(p.name, string(req.paramValue(p)))
	}
	for _, f := range w.Header().Fields() {
		x.w.header.Add(string(f.Name), string(f.Value))
	}
	x.bodyDone = true
	if len(req.Body) > 0 {
		x.pipe = newBodyPipe(x)
		x.pipe.buf, x.pipe.err = bytes.Clone(req.Body), io.EOF
		sreq.Body = x.pipe
	}
	return x, nil
}

// streamBody gives the request a body the protocol feeds as it arrives.
func (x *stdExchange) streamBody(expect100 bool) {
	x.pipe = newBodyPipe(x)
	x.req.Body = x.pipe
	x.expect100 = expect100
}

// start runs the handler, counted as offloaded. When it cannot start
// (the pool refused it), the request is answered with 503.
func (x *stdExchange) start() bool {
	x.ex.shared().st.offloaded.Add(1)
	if err := x.sh.spawn(x); err != nil {
		x.ex.setStd(nil)
		x.cancel()
		x.ex.fail(StatusServiceUnavailable)
		return false
	}
	return true
}

// current reports (on the loop) whether x is still its exchange's FromStd
// request and the connection is open.
func (x *stdExchange) current() bool { return x.ex.std() == x && !x.c.Closed() }

// cancel ends the request's context.
func (x *stdExchange) cancel() { x.ctx.cancel() }

// protocolError ends the exchange on a malformed body: the handler sees a
// read error, the client gets status (if no response started), and the
// connection closes.
func (x *stdExchange) protocolError(status int) {
	x.cancel()
	x.ex.setStd(nil) // the handler's further writes fail
	x.ex.fail(status)
}

// resumeRead runs on the loop when the handler has drained the pipe.
func (x *stdExchange) resumeRead() {
	if x.ex.std() == x {
		x.ex.bodyDrained()
	}
}

// peerGone runs on the loop when the client half-closed during the
// exchange: like net/http, the request's context is canceled.
func (x *stdExchange) peerGone() {
	x.cancel()
	if !x.bodyDone {
		x.pipe.closeWrite(io.ErrUnexpectedEOF)
	}
}

// connClosed runs on the loop when the connection is gone.
func (x *stdExchange) connClosed(err error) {
	x.cancel()
	if x.pipe != nil {
		if err == nil {
			err = net.ErrClosed
		}
		x.pipe.closeWrite(err)
	}
}

// run runs the handler off the loop.
func (x *stdExchange) run() {
	defer func() {
		if r := recover(); r != nil {
			x.w.panicked(x.srv.handlerPanicked(r, "remote", x.req.RemoteAddr, "uri", x.req.RequestURI))
		}
	}()
	x.sh.h.ServeHTTP(&x.w, x.req)
	if x.w.hijacked {
		x.cancel() // the connection is the handler's; the request is over
		return
	}
	x.w.finish()
}

// release runs on the loop once the handler has returned and its last
// output is queued (or instead of the handler, for an HTTP/2 stream reset
// before it started): the request's context ends, its body is discarded,
// the writer's buffers go back to the connection, and the exchange
// forgets x. It reports whether x was the current request of an open
// connection, which then still needs ending.
func (x *stdExchange) release(sc *stdConn) bool {
	x.cancel()
	if x.pipe != nil {
		x.pipe.Close()
	}
	// The handler has returned (release is posted after it), so the
	// writer's internal buffers are free for the connection's next request.
	if sc.resp == nil {
		sc.resp, x.w.resp = x.w.resp, nil
	}
	if sc.buf == nil && cap(x.w.buf) <= 64<<10 {
		sc.buf, x.w.buf = x.w.buf[:0], nil
	}
	if x.ex.std() != x {
		return false
	}
	x.ex.setStd(nil)
	return !x.c.Closed()
}

// done runs on the loop after the last bytes of the response were
// written: the exchange ends, and the protocol moves on to the next
// request or closes.
func (x *stdExchange) done(mustClose bool) {
	x.ex.stdReturned()
	if !x.release(x.ex.stdState()) {
		return
	}
	if x.ex.end(!mustClose && x.bodyDone) {
		x.ex.resume()
	}
}
