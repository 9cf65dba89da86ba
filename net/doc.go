// Package net is veloq's public TCP API, and the only package a TCP user
// imports: servers whose connections are served by thread-per-core
// reactor loops, outbound connections driven by the same loops, and the
// engine under them (Loop, Config, Stats, Timer, the errors).
//
// A Handler gets its callbacks on the connection's loop: OnOpen, OnData
// (consume input with Next, Peek, Discard or Read; write with Write, which
// never blocks), OnEOF if it implements EOFHandler, and OnClose. The rules:
//
//   - Handlers must not block the loop; offload heavy or blocking work
//     with Offload or OffloadBlocking (or the executor package and
//     Conn.Loop().Post). A callback that runs past Config.BlockThreshold is
//     logged with its handler type (or, for an adapter such as the HTTP
//     server's, what it says as a Describer) and counted in Stats.Blocked.
//   - Conn methods run on the connection's loop. Called from another
//     goroutine, the ones that return an error do nothing and return
//     ErrNotOnLoop; use Conn.AsyncWrite or Loop.Post there.
//   - OnClose gets nil after the handler's own close, io.EOF after the
//     peer's, and the cause otherwise, for every handler shape; the
//     connection's addresses still answer in it.
//   - Without OnEOF, the peer's FIN closes the connection; a relay
//     implements OnEOF and passes the half-close on (see EOFHandler).
//   - Offload keeps a connection's answers in order (see Offload).
//   - A port in use is refused; WithPortSharing shares it on purpose.
//
// The package name shadows the standard library's net on purpose; import
// it as vnet:
//
//	import vnet "github.com/veloq/veloq/net"
//
// ErrClosed is the standard library's net.ErrClosed, so errors.Is works
// with either name. Package reactor, where the engine used to live, only
// holds deprecated aliases of these names.
package net
