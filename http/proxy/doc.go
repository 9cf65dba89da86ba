// Package proxy is an HTTP reverse proxy that runs entirely on veloq's
// loops: a [Proxy] is a [vhttp.Handler] (so it composes with vhttp.Router
// and middleware) that forwards each request with the [client] on the
// request's own loop and streams the answer back through a detached
// response, with no goroutine, channel or lock per request and its
// per-request state pooled.
//
// For each request, inline on the loop, ServeHTTP:
//
//   - picks an upstream by the policy (RoundRobin, LeastOutstanding and
//     PeakEWMA by power of two choices, Hash on a header, cookie or the
//     path), skipping upstreams that are draining, ejected or failing
//     their health checks; none available: 503;
//   - builds the upstream request: method, origin-form target, Host
//     passed (or set by WithHost), the fields minus the hop-by-hop ones
//     (RFC 9110 §7.6.1: Connection and every field it names, Keep-Alive,
//     Proxy-Connection, TE except "trailers", Transfer-Encoding, Upgrade
//     outside an upgrade),
//     X-Forwarded-For appended to, X-Forwarded-Proto and -Host set, and
//     optionally an RFC 7239 Forwarded element and Via; the body, streamed
//     when the proxy is served under [vhttp.StreamBody] (as
//     cmd/veloq-proxy serves it), else the body the server collected
//     (within its limits);
//   - detaches the response and sends the request; the answer's head
//     (hop-by-hop fields removed), body parts and trailers are forwarded
//     as they arrive (an HTTP/1 body, on io_uring, from the upstream's
//     receive buffers themselves, without a copy: see
//     [vhttp.Responder.WriteFrom]). While the client is more than
//     WithMaxBuffered bytes behind, the upstream is paused (its TCP
//     window closes), so memory per client stays bounded whatever the
//     body size. A client that goes away cancels the upstream request.
//   - under StreamBody, forwards the request body in parts as the client
//     sends it (Content-Length kept, chunked when unknown, DATA frames to
//     an HTTP/2 upstream): bodies stream both ways. None of the body is
//     read from the client before the attempt's upstream connection is
//     established (a client waiting on "Expect: 100-continue" is told to
//     go on then), so that a refused connect can still go to another
//     upstream. While the upstream
//     is more than WithMaxBuffered bytes behind, the client's body is
//     paused (the server stops reading its connection or withholds its
//     HTTP/2 window; Stats.BodyPaused counts it), so a 1 GiB upload
//     holds about that much per pair. A client that cuts its body
//     cancels the upstream request, which sees it cut short (its
//     connection or stream reset), never complete.
//
// On io_uring, serve the proxy on loops with receive buffers of 64 KiB
// (vnet.WithLoopConfig(vnet.Config{RecvBufferSize: 64 << 10,
// RecvBuffers: 128}), as cmd/veloq-proxy does): with the loop's default
// 16 KiB, a 16 KiB answer and its head take two receives and two sends
// to the client, and a 1 MiB answer 65 of each, where epoll reads 64 KiB
// at a time.
//
// Failures: an upstream that cannot be reached or fails before any
// response byte is retried on another upstream when that is safe (a
// refused connect sent nothing; otherwise only idempotent methods), at
// most WithRetries times and within a retry budget (retries in flight
// below a share of the requests in flight). A streamed body is held in
// the client until the upstream connection is up, so a refused connect is
// retried as for any request; once any of its bytes went to an upstream,
// the request is never retried: the parts taken are gone. A failed upstream or a
// malformed answer gives 502 (the client's parser closes the upstream
// connection, so nothing past a bad answer is ever read as the next
// one), an attempt past WithTimeout 504; an answer that fails after its
// head went out is cut, so the client sees it incomplete.
//
// Upstream health: passive ejection after consecutive failures (connect
// failures, resets, timeouts, malformed answers, 5xx) for a cooldown that
// doubles with each ejection in a row; active checks (WithHealthCheck) from
// a timer on the loop of the proxy's first request. The set changes while
// serving (Add, Drain, Remove) without failing requests in flight. Stats
// reports per-upstream counters and the client's pool statistics.
//
// Upgrade (WebSocket and any other protocol): an HTTP/1.1 request whose
// Connection lists "upgrade" is forwarded with "Connection: Upgrade" and
// its Upgrade field. When the upstream answers 101, its head goes to the
// client ([vhttp.Responder.Hijack]) and the two connections become a
// byte relay on the loop: bytes that came with the request or with the
// 101 are relayed first, each direction queues at most WithMaxBuffered
// bytes toward its destination before its source is paused, a half-close
// is passed on, and a reset on one side resets the other. Any other
// answer is forwarded as a normal response. Stats counts the Upgrades
// and the Tunnels open. A tunnel is a hijacked connection to the server:
// Server.Shutdown does not wait for it (as net/http does not), and
// Server.Close cuts it, both sides.
//
// Upstreams speak HTTP/1.1 (plaintext, or TLS with an https:// address) or
// HTTP/2 (h2c:// with prior knowledge, h2:// over TLS), trailers passed
// through both ways: the trailer fields of a client's streamed body (an
// HTTP/1.1 chunked trailer section, an HTTP/2 trailing HEADERS) go to the
// upstream as a chunked trailer section or a trailing HEADERS, minus the
// hop-by-hop and framing fields, as the answer's do (an HTTP/1.1
// upstream's body framed by Content-Length has no place for them).
//
// This package is experimental in v0.1.0: it is new, and its API may
// change in a minor release without a deprecation period (see the
// CHANGELOG's v0.1.0 section).
package proxy
