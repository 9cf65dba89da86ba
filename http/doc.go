// Package http is veloq's HTTP server, HTTP/1.1 and HTTP/2 on one port:
// [ListenAndServe], or [NewServer] and [Server.Listen], serve a [Handler]
// on veloq's loops (package vnet). The package name shadows net/http on purpose; import it
// as vhttp where both are needed.
//
// # Serving
//
// [NewServer] takes a [Handler], which runs inline on the connection's
// loop with a [Request] view (body included) and a [ResponseWriter];
// [Offloaded] (or [WithOffload]) moves a CPU-heavy handler to the
// stealable pool, [OffloadedBlocking] a blocking one to a blocking pool
// (an offloaded handler may stream its body with [ResponseWriter.Flush]),
// [ResponseWriter.Detach] lets an inline handler return before its answer
// is ready and complete it later on the same loop through a [Responder]
// (a proxy answering from its upstream's callbacks, streamed with
// backpressure, no goroutine); under [StreamBody] (the server's handler
// or one [Router] route's) such a handler reads
// the request body too as it arrives ([Responder.OnBody], paced by
// PauseBody and ResumeBody), so bodies stream both ways, of any size.
// [ResponseWriter.Hijack] hands the
// connection to a TCP handler after the response (protocol upgrades).
// A [Router] matches
// Go 1.22 ServeMux patterns ("GET /users/{id}", "/files/{path...}") with
// no allocation, answers 404 and 405 (with Allow) and serves HEAD from
// GET routes; middleware is a func(Handler) Handler, composed with
// [Chain]. [Request.QueryValue], [Request.FormValue] and [Request.Cookie]
// read values without allocating ([AppendUnescaped] decodes them), and
// an offloaded handler's [ResponseWriter.Context] ends when the client
// leaves. Keep-alive,
// pipelining, HTTP/1.0, HEAD, chunked bodies, 100-continue, a connection
// limit and graceful [Server.Shutdown] are handled by the server:
// Shutdown stops accepting, closes idle keep-alive connections, answers
// the requests in progress with "Connection: close", sends HTTP/2 clients
// a GOAWAY and, after a PING round trip, the final one, tells hijacked
// connections that take part (a WebSocket closes with 1001), and cuts
// what remains when its context ends; [Stats] counts drained and cut
// connections.
//
// [FromStd] serves any net/http handler with net/http semantics: streamed
// request bodies, Flusher, Hijacker (gorilla/websocket, gobwas/ws and
// coder/websocket work unchanged), NewResponseController deadlines and
// the usual context values. Each request runs on a goroutine of its own by
// default, so handlers that block cost a goroutine and cannot starve the
// others; [WithStdBlockingPool] bounds those goroutines and [WithStdPool]
// puts CPU-bound handlers on the stealable pool. A FromStd handler below a
// fast middleware runs the same way.
//
// # Timeouts and memory
//
// Every wait on a client is bounded: the head (read-header timeout, 10s),
// a request body that stops arriving (read-body timeout, 60s, restarted
// by each arrival: 408, or ErrBodyReadTimeout from a FromStd Body.Read),
// an idle keep-alive connection (60s) and, when set, a peer that stops
// reading the response (write timeout). Bodies collected for fast
// handlers grow as their bytes arrive, never by the announced length, and
// all connections together hold at most [WithMaxBufferedBodyBytes]
// (64 MiB; 503 past it); a FromStd body streams through at most 64 KiB
// per connection, none while its handler waits on a stalled client.
// [Limits] bound the head (16 KiB, 100 fields, an 8 KiB target) and
// collected bodies (4 MiB); a streamed body has its own, optional limit
// ([WithStdMaxBodyBytes], or StreamBody's). A body streamed to
// [Responder.OnBody] is held no more than one read (HTTP/1: the server
// stops reading the connection while the reader is paused) or one
// stream window (HTTP/2: the window goes back as the reader takes the
// bytes).
//
// # HTTP/2
//
// HTTP/2 (RFC 9113) is on by default ([WithHTTP2]): by ALPN "h2" over
// [WithTLS], and in plaintext (h2c) for clients that open with HTTP/2's
// preface or ask with "Upgrade: h2c". Every handler style serves its
// streams unchanged, many streams of one connection at once (Hijack
// excepted: [ErrHijackUnavailable]); a FromStd handler sees ProtoMajor 2,
// the request's trailers (r.Trailer, as over HTTP/1.1 chunked) and can
// send trailers, so grpc-go's Server mounts through FromStd. The
// server bounds streams (250 at once), header blocks, flow-control windows
// both ways and cheap frames (rapid reset and the floods of RFC 9113
// §10.5 end in GOAWAY ENHANCE_YOUR_CALM); [Stats] counts its connections,
// streams, resets and refusals.
//
// # Not supported yet
//
// HTTP/3 (QUIC), HTTP/2 server push and WebSocket over HTTP/2 (RFC 8441)
// are not supported, nor kernel TLS ([WithTLS] is crypto/tls on the loop).
// veloq runs on Linux only.
//
// # Malformed requests
//
// The server's request parser follows RFC 9112 strictly; below it, the
// rest of the HTTP/1 protocol core (chunked decoding, the byte scanners,
// the Date cache and the serializers) is the internal package
// http/internal/h1, as HTTP/2's framing is http/internal/h2.
//
// Lines must end in CRLF. Each rejection is a *[ProtocolError] carrying
// the status the server answers with before it closes the connection:
//
//	400 Bad Request
//	    method or field name not a token; request-target with a byte outside
//	    VCHAR, empty, or in the wrong form for the method; malformed
//	    HTTP-version; bare CR or bare LF; obsolete line folding (a field line
//	    starting with SP or HTAB); whitespace between field name and colon;
//	    NUL or another control character other than HTAB in a field value;
//	    missing Host in HTTP/1.1, more than one Host, invalid Host;
//	    Content-Length that is not 1*DIGIT or overflows int64; differing
//	    Content-Length values (identical repeats, also as a list, are
//	    accepted); both Content-Length and Transfer-Encoding;
//	    Transfer-Encoding in an HTTP/1.0 request; chunked not the final
//	    transfer coding, or applied twice (RFC 9112 §6.3: the body length
//	    cannot be determined); malformed chunked body.
//	413 Content Too Large
//	    Content-Length or decoded chunked body above Limits.MaxBodyBytes.
//	414 URI Too Long
//	    request-target above Limits.MaxTargetBytes.
//	417 Expectation Failed
//	    an Expect member other than 100-continue (HTTP/1.1).
//	431 Request Header Fields Too Large
//	    head above Limits.MaxHeaderBytes or more than Limits.MaxHeaders
//	    fields; likewise for a chunked body's trailer section.
//	501 Not Implemented
//	    a transfer coding other than chunked before the final chunked, e.g.
//	    "gzip, chunked": the framing is known but the coding is not
//	    supported.
//	505 HTTP Version Not Supported
//	    an HTTP-version with a major version other than 1.
//
// Use errors.Is with the sentinels (ErrBadRequest, ErrHeaderTooLarge,
// ...) to test the class of an error, for example one a FromStd
// handler's Body.Read returns, or [ErrorStatus] to get the status.
//
// Errors are decided from the bytes seen so far: for any split of the
// input, every prefix is either incomplete or gets the same answer as the
// whole input, so the server rejects garbage as soon as it arrives.
package http
