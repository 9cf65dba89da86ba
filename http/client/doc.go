// Package client is an HTTP/1.1 and HTTP/2 client on veloq's loops, for
// gateways and proxies whose requests to upstreams should cost no
// goroutine, channel, lock or allocation each.
//
// A Client keeps keep-alive connections to each upstream (address + TLS)
// per loop: a request sent on loop L goes over L's connections, so loops
// share nothing on the request path. The pools are bounded (connections,
// idle connections and waiting requests per upstream per loop, an idle
// timeout), and an idle connection the upstream closes is dropped as soon
// as its FIN or reset arrives, so no request is written into a connection
// the loop knows is dead. A request that fails on a reused connection
// before any response byte came back is retried once on a new connection
// when that is safe (an idempotent method, or no body), and never once a
// part of a streamed body went out. A call cancelled on HTTP/1
// (Call.Cancel) closes its connection unless the rest of the response is
// short: then the connection reads it, discards it and is pooled again
// (Stats.Drained), so a caller whose own clients leave, such as a proxy
// when a load generator stops, does not pay a new connection each time.
// Stats counts cancellations apart from errors.
//
// A request body may be produced in parts (Request.StreamBody): written
// with Call.WriteBody as the caller has it, ended with EndBody, paced with
// BodyBuffered and WhenBodyWritable (the connection's output, or for
// HTTP/2 the part the peer's flow-control windows hold back), with
// Content-Length or, when the length is unknown, chunked (HTTP/1.1) or
// DATA frames until EndBody (HTTP/2). A proxy forwards uploads of any
// size this way, holding a bounded amount.
//
// Responses are parsed strictly (RFC 9112): the framing by Content-Length,
// chunked or close; no body for HEAD, 204 and 304; interim 1xx answers
// skipped; Content-Length with Transfer-Encoding, differing lengths, bare
// LF and obs-fold refused with a *ProtocolError; and bytes past a
// response's end are never read as another response: the connection is
// closed instead of pooled.
//
// HTTP/2 (Request.Proto = ProtoHTTP2): h2c with prior knowledge, or h2
// over TLS chosen by ALPN (HTTP/1.1 when the server declines). Per loop
// and upstream, a connection carries up to the server's
// SETTINGS_MAX_CONCURRENT_STREAMS streams; past that new connections are
// dialed up to the per-host bound, then calls wait. The same
// ResponseHandler and Pause/Resume/Cancel apply: a stream's window is
// given back only as its body is delivered, so Pause stops the upstream
// once the window (256 KiB) is spent; Cancel resets the stream
// (RST_STREAM) and the connection goes on; streams the upstream did not
// process (REFUSED_STREAM, GOAWAY) are retried on another stream;
// trailers come to OnResponseEnd.
//
// There are three ways to call it:
//
//   - Client.Send, on a loop (in a vnet or vhttp handler, a timer or a
//     posted closure): the response comes back to a ResponseHandler on the
//     same loop, head and body as views into the connection's input, with
//     Call.Pause and Call.Resume for backpressure;
//   - Client.Do, from any goroutine: it blocks until the head arrives, and
//     the body streams, paced by the reader;
//   - Transport, a net/http.RoundTripper for http.Client and
//     httputil.ReverseProxy.
//
// Do and Transport run their requests on loops given with WithLoops, or on
// loops the Client starts itself (one per CPU).
//
// This package is experimental in v0.1.0: it is new, and its API may
// change in a minor release without a deprecation period (see the
// CHANGELOG's v0.1.0 section).
package client
