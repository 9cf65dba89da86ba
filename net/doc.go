// Package net is veloq's public TCP API: servers whose connections are
// served by thread-per-core reactor loops, and outbound connections driven
// by the same loops.
//
// A Handler gets three callbacks, all on the connection's loop: OnOpen,
// OnData (consume input with Next, Peek, Discard or Read; write with Write,
// which never blocks) and OnClose. Handlers must not block; offload heavy
// or blocking work (see the executor package) and come back with
// Conn.Loop().Post or Conn.AsyncWrite.
//
// The package name shadows the standard library's net on purpose; import
// it as vnet:
//
//	import vnet "github.com/veloq/veloq/net"
package net
