// Package http is veloq's HTTP server, HTTP/1.1 and HTTP/2 on one port:
// [ListenAndServe], or [NewServer] and [Server.Listen], serve a [Handler]
// on veloq's loops (package vnet). The package name shadows net/http on purpose; import it
// as vhttp where both are needed.
//
// Below the server is its protocol core (a request parser, a chunked
// body decoder and response serializers over byte slices), exported for
// code that speaks HTTP/1.1 itself; a server's handlers never need it.
// It is described last, under "Protocol core".
//
// # Serving
//
// [NewServer] takes a [Handler], which runs inline on the connection's
// loop with a [Request] view (body included) and a [ResponseWriter];
// [Offloaded] (or [WithOffload]) moves a CPU-heavy handler to the
// stealable pool, [OffloadedBlocking] a blocking one to a blocking pool
// (an offloaded handler may stream its body with [ResponseWriter.Flush]),
// and [ResponseWriter.Hijack] hands the connection to a
// TCP handler after the response (protocol upgrades). A [Router] matches
// Go 1.22 ServeMux patterns ("GET /users/{id}", "/files/{path...}") with
// no allocation, answers 404 and 405 (with Allow) and serves HEAD from
// GET routes; middleware is a func(Handler) Handler, composed with
// [Chain]. [Request.QueryValue], [Request.FormValue] and [Request.Cookie]
// read values without allocating ([AppendUnescaped] decodes them), and
// an offloaded handler's [ResponseWriter.Context] ends when the client
// leaves. Keep-alive,
// pipelining, HTTP/1.0, HEAD, chunked bodies, 100-continue, a connection
// limit and graceful [Server.Shutdown] are handled by the server.
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
// ([WithStdMaxBodyBytes]).
//
// # HTTP/2
//
// HTTP/2 (RFC 9113) is on by default ([WithHTTP2]): by ALPN "h2" over
// [WithTLS], and in plaintext (h2c) for clients that open with HTTP/2's
// preface or ask with "Upgrade: h2c". Every handler style serves its
// streams unchanged, many streams of one connection at once (Hijack
// excepted: [ErrHijackUnavailable]); a FromStd handler sees ProtoMajor 2
// and can send trailers, so grpc-go's Server mounts through FromStd. The
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
// # Protocol core
//
// The server's building blocks, for code that parses or writes HTTP/1.1
// on its own connections: [Parser], [ChunkedDecoder], [NextField],
// [Response], [DateCache], and the Append functions ([AppendStatusLine],
// [AppendChunk], [AppendChunkHeader], [AppendLastChunk],
// [AppendContinue], [AppendError]). Each of their doc comments says it
// belongs to the core.
//
// [Parser.Parse] parses a request head from the start of the connection's
// accumulated input. It returns ErrNeedMore until the head is complete,
// then the head's length n; the body, or the next pipelined request,
// starts at buf[n:]. The resulting [Request] is a view into the buffer.
// A chunked body is read with a [ChunkedDecoder]; a Content-Length body
// is simply the next ContentLength bytes.
//
// The parser follows RFC 9112 strictly. Lines must end in CRLF. Each
// rejection is a *[ProtocolError] carrying the status to answer with,
// after which the connection must be closed:
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
// Use errors.Is with the sentinels (ErrBadRequest, ErrHeaderTooLarge, ...)
// to test the class, or [ErrorStatus] to get the status.
//
// Errors are decided from the bytes seen so far: for any split of the
// input, every prefix yields either ErrNeedMore or the same result as the
// whole input, so the server can reject garbage as soon as it arrives.
//
// On the response side, [Response] collects a handler's status, fields and body and serializes
// them with Date, Server, framing and Connection handling.
// [AppendStatusLine], [AppendChunk], [AppendLastChunk], [AppendContinue]
// and [AppendError] are the building blocks, and [DateCache] keeps the
// Date value for the current second.
package http
