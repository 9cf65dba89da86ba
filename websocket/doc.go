// Package websocket serves WebSocket (RFC 6455) on veloq's reactor loops:
// the HTTP server upgrades a request, and from then on the connection is
// served on its loop, with callbacks, like a TCP handler. While idle it
// costs one Conn of about 200 bytes on top of the reactor connection: no
// goroutine, no buffer.
//
// # Upgrading
//
// An [Upgrader], built once with [NewUpgrader] and options, validates the
// opening handshake inside a fast-path HTTP handler and hands the
// connection over with [vhttp.ResponseWriter.Hijack]:
//
//	u := websocket.NewUpgrader(websocket.WithSubprotocols("chat"))
//	h := vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
//		u.Upgrade(w, r, myHandler) // answers 101, or 400/403/405/426 and an error
//	})
//
// Upgrade checks the method (GET), HTTP/1.1, the Upgrade and Connection
// tokens, Sec-WebSocket-Version 13 and a 16-byte Sec-WebSocket-Key,
// applies the Origin check, picks a subprotocol, and negotiates
// permessage-deflate when [WithCompression] allows it.
//
// # Protocol core
//
// The frame codec is pure: [ParseHeader], [PutHeader], [MaskBytes] and the
// [Decoder] work on byte slices, do no I/O and never allocate. The
// Decoder enforces the RFC for a server: client frames must be masked
// (else close 1002), reserved bits without an extension and reserved
// opcodes are 1002, control frames are at most 125 bytes and never
// fragmented, continuation frames must continue a message and a new
// message may not start inside one (control frames may come between
// fragments), text must be UTF-8 — checked incrementally, across frames
// and reads — else 1007, and frames and messages over the limits
// ([WithMessageLimits]) are 1009. Close payloads are checked too: a 1-byte
// payload or a code that may not be sent is 1002, a reason that is not
// UTF-8 is 1007.
//
// # The connection on the loop
//
// A [Conn] reads frames from the reactor connection's input on every
// OnData and calls the [Handler]. Pings are answered with pongs at once.
// A peer's close frame is echoed and the TCP connection closed;
// [Conn.Close] starts the handshake from this side and closes after the
// peer's answer or [WithCloseHandshakeTimeout]. The TCP close is a
// half-close that then waits for the peer's FIN (at most the same
// timeout), so what the peer still sends cannot turn it into a reset. [WithPing] sends pings and
// drops a peer that stops answering. [Handler.OnClose] says how it ended.
//
// What is zero-copy:
//
//   - Input: a message that arrives in one frame (the usual case) is
//     unmasked in place in the loop's input buffer and handed to
//     OnMessage as a view of it: no copy, no allocation. (Writing into
//     that buffer is sound: once delivered, it belongs to the loop until
//     the callback returns — an io_uring provided buffer is recycled to
//     the kernel only then — and the bytes the decoder unmasks are the
//     ones it consumes, so none is unmasked twice.) Frames up to
//     64 KiB are waited for whole so they take this path (the reactor's
//     ReadBufferCap, 4 MiB by default, must leave room for that). Fragmented
//     messages, frames larger than that (streamed as they arrive) and
//     compressed messages are assembled in a buffer from the Upgrader's
//     pool, returned to the pool right after OnMessage.
//   - Output: [Conn.WriteMessage] encodes the header on the stack and
//     appends header and payload to the connection's output in one
//     Writev; the loop sends every connection's output once per
//     iteration. The payload is copied once, into that output buffer.
//   - Broadcast: a [PreparedMessage] is encoded once; server frames are
//     unmasked, so the same bytes are appended to every connection's
//     output ([Broadcast], [Group]) with one posted task per loop.
//
// The message view handed to OnMessage is valid only until OnMessage
// returns: it may be the loop's receive buffer, reused for the next
// read. Copy what must outlive the callback.
//
// # Backpressure and other goroutines
//
// The reactor stops reading from a connection whose pending output is
// above its high-water mark and resumes below the low one, so a peer
// that sends but does not read (pings included) is slowed by TCP.
// [WithMaxPendingOutput] bounds what a handler or a broadcast may queue
// for a peer that does not read: a message that would pass it is not
// written and the write returns [ErrOutputFull] (a Group counts it as
// skipped). [Conn.OutputBuffered] and [Conn.OnDrain] let a producer pace
// itself instead.
//
// The HTTP server's graceful Shutdown closes every connection with 1001
// (going away), after the handler's OnShutdown if it is a
// [ShutdownHandler], and waits for the close handshakes until its
// deadline: clients reconnect, to the new process after a hot upgrade.
//
// [Upgrader.Stats] counts handshakes and how connections ended; refused
// handshakes and failed connections are logged at debug level
// ([WithLogger]).
//
// Conn's methods run on the loop. From other goroutines use
// [Conn.AsyncWrite] and [Conn.AsyncClose] (posted to the loop),
// [Broadcast] or [Group.Broadcast].
//
// # permessage-deflate
//
// Off by default. With [WithCompression] the server accepts a client's
// permessage-deflate offer (RFC 7692) and answers with
// server_no_context_takeover and client_no_context_takeover: every
// message is compressed on its own, with a compress/flate compressor or
// decompressor borrowed from the Upgrader's pool for that one message, so
// an idle connection holds no compression state. Offers that restrict
// the server's window below 15 bits are declined (compress/flate always
// uses 32 KiB). Inflated size counts against the message limit.
package websocket
