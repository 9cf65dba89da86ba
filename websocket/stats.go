package websocket

import "sync/atomic"

// Stats are an Upgrader's counters, summed over its connections. They
// count per-connection events only: per-message counters on memory shared
// by every loop would make the loops contend on each message.
type Stats struct {
	Upgrades       uint64 // handshakes answered with 101
	Rejected       uint64 // requests answered 4xx (or 500) by Upgrade
	Open           int64  // connections open now
	ClosedByPeer   uint64 // the peer started the close handshake
	ClosedLocally  uint64 // Close was called (handshake completed or timed out)
	ProtocolErrors uint64 // connections failed with 1002, 1007 or 1009
	Abnormal       uint64 // TCP ended without a close handshake (incl. pong timeouts and panics)
	OutputFull     uint64 // messages refused by WithMaxPendingOutput
	// The server's graceful Shutdown: GoingAway counts the close frames
	// 1001 it started; Drained the connections open when it started that
	// ended before its deadline, Cut those closed at its deadline.
	GoingAway, Drained, Cut uint64
}

type counters struct {
	upgrades, rejected, byPeer, locally, protocol, abnormal, outputFull atomic.Uint64
	goingAway, drained, cut                                             atomic.Uint64
	open                                                                atomic.Int64
}

// Stats returns a snapshot of the counters.
func (u *Upgrader) Stats() Stats {
	s := &u.stats
	return Stats{
		Upgrades: s.upgrades.Load(), Rejected: s.rejected.Load(), Open: s.open.Load(),
		ClosedByPeer: s.byPeer.Load(), ClosedLocally: s.locally.Load(), ProtocolErrors: s.protocol.Load(),
		Abnormal: s.abnormal.Load(), OutputFull: s.outputFull.Load(),
		GoingAway: s.goingAway.Load(), Drained: s.drained.Load(), Cut: s.cut.Load(),
	}
}
