package http

import vnet "github.com/veloq/veloq/net"

// An exchange is one request and its answer as a protocol carries them:
// the current request of an HTTP/1 connection (conn). Whatever produces an
// answer — the fast ResponseWriter, an Offloaded handler, a FromStd
// handler — goes through it, and none of them learns how the protocol
// frames a head or a body part, when the client can take more, or what
// becomes of the connection afterwards.
//
// Its methods run on the connection's loop (canHijack excepted). Code off the loop posts a
// function to the loop (transport().Loop().Post) and there checks that its
// exchange is still the one in progress before it calls them.
//
// An answer is either whole (writeResponse, then end) or streamed
// (writeHead, any number of writeBody, then end); fail and abort end an
// exchange whose answer cannot be completed.
type exchange interface {
	// transport is the connection: its loop, addresses and TLS state. Only
	// the protocol reads from it or writes to it.
	transport() *vnet.Conn
	// shared is the loop's state the exchanges of all its connections
	// share: counters and scratch buffers.
	shared() *loopState

	// writeResponse sends resp, buffered whole, as the answer to req.
	writeResponse(resp *response, req *Request)
	// writeHead starts a streamed answer to req; cl >= 0 announces that
	// many body bytes, a negative cl an unknown number.
	writeHead(resp *response, req *Request, cl int64)
	// writeBody sends the next part of a streamed body.
	writeBody(p []byte)
	// forwardBody sends the next n bytes of src's input (a connection of
	// the same loop, in its callback) as the next part of a streamed
	// body, and consumes them from src.
	forwardBody(src *vnet.Conn, n int)
	// whenWritable calls f on the loop once the client is within
	// stdOutHigh bytes of the answer sent so far, with nil, or with
	// net.ErrClosed once the exchange is gone: a writer off the loop waits
	// on it, so that it cannot outrun the client.
	whenWritable(f func(error))
	// buffered is the number of bytes of the answer sent so far that the
	// client has not taken yet.
	buffered() int

	// writeFile sends resp's head, then body's bytes from its file, and
	// ends the exchange itself (end, then resume) once the last byte is
	// out: with no user-space copy where the protocol allows it.
	writeFile(resp *response, req *Request, body *fileBody)
	// writeTrailers gives the trailer fields that end a streamed answer:
	// for HTTP/1 in the last chunk (dropped when the body is not
	// chunked), for HTTP/2 in a HEADERS frame that ends the stream. t must
	// stay unchanged until end.
	writeTrailers(t *ResponseHeader)
	// end completes the exchange after its answer. reusable is false when
	// the connection cannot carry another exchange (the request body was
	// not read to its end, the body sent was shorter than announced). It
	// reports whether the protocol may go on at once with the next
	// request, for a caller on the loop that loops over the input.
	end(reusable bool) bool
	// resume goes on with input that waited while the answer was produced
	// off the loop.
	resume()
	// fail answers with an error status, unless the answer started, and
	// ends the exchange and its connection.
	fail(status int)
	// abort ends the exchange with no (further) answer, so that the
	// client sees the answer is incomplete: gracefully with a nil err,
	// at once (the connection reset) with err.
	abort(err error)
	// cancelOnGone makes the protocol call cancel when the client goes
	// away (closes, half-closes, resets) while the answer is produced
	// off the loop; nil forgets it.
	cancelOnGone(cancel func())

	// std is the FromStd request in progress on the exchange, nil if
	// none; setStd makes x the one. stdState is the connection's FromStd
	// state, made on first use.
	std() *stdExchange
	setStd(x *stdExchange)
	stdState() *stdConn
	// stdReturned is called once for each FromStd handler started on
	// the exchange, after it returned, whether or not the exchange is
	// still in progress: a protocol that runs several at a time bounds
	// those still running, winding down after a reset included.
	stdReturned()
	// askBody is called when a FromStd handler first reads its request
	// body: the client's time to send it counts from now, and send100
	// asks the protocol to tell a client that waits (Expect:
	// 100-continue) to send it.
	askBody(send100 bool)
	// bodyDrained is called when the handler has taken the body bytes
	// that waited for it: the protocol takes more from the client.
	bodyDrained()

	// canHijack reports whether the protocol can hand its connection to
	// another handler (HTTP/1 can; a multiplexed protocol cannot). Unlike
	// the other methods it may be called from any goroutine.
	canHijack() bool
	// handOver gives the connection to h: the exchange and the server
	// forget it.
	handOver(h vnet.Handler)
}

// The step after a handler returns. A handler (or a handler it calls, or
// a panic) leaves at most one of these in its ResponseWriter; the last one
// set wins, and a panic overrides them all.
type step uint8

const (
	stepRespond step = iota // send the buffered response
	stepOffload             // run the job on a pool; its response follows
	stepStd                 // run a FromStd handler off the loop
	stepHijack              // send the response, then hand the connection over
	stepFail                // the handler panicked: 500 and close
	stepAbort               // panic(net/http.ErrAbortHandler): close, no answer
	stepDetach              // the answer follows through a Responder (detach.go)
)

// then is what the server does once the handler returns: its step and
// what the step needs.
type then struct {
	step   step
	job    *offloadJob  // stepOffload
	std    *stdHandler  // stepStd
	hijack vnet.Handler // stepHijack
}
