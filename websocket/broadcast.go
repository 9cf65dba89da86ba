package websocket

import (
	"fmt"
	"sync"
	"sync/atomic"

	vnet "github.com/veloq/veloq/net"
)

// A PreparedMessage is a message encoded once as a complete server frame
// (header and payload). Server frames are not masked, so the same bytes
// are valid on every connection: sending it to many connections encodes
// nothing again, it only appends the bytes to each one's output. It is
// immutable and safe to share between goroutines and loops.
//
// Prepared messages are sent uncompressed, also on connections that
// negotiated permessage-deflate: RSV1 is per message, so an uncompressed
// message is always valid there.
type PreparedMessage struct {
	typ   MessageType
	frame []byte
}

// NewPreparedMessage encodes p (copied) as one final frame of type typ.
func NewPreparedMessage(typ MessageType, p []byte) (*PreparedMessage, error) {
	if typ != TextMessage && typ != BinaryMessage {
		return nil, fmt.Errorf("websocket: NewPreparedMessage with message type %d", typ)
	}
	h := Header{Fin: true, Opcode: Opcode(typ), Length: int64(len(p))}
	frame := make([]byte, 0, h.Len()+len(p))
	frame = AppendHeader(frame, &h)
	return &PreparedMessage{typ: typ, frame: append(frame, p...)}, nil
}

// Type returns the message's type.
func (pm *PreparedMessage) Type() MessageType { return pm.typ }

// Frame returns the encoded frame; do not modify it.
func (pm *PreparedMessage) Frame() []byte { return pm.frame }

// WritePrepared sends pm on c, with WriteMessage's errors (ErrClosed,
// ErrOutputFull). Call it on the loop.
func (c *Conn) WritePrepared(pm *PreparedMessage) error {
	if err := c.admit(len(pm.frame)); err != nil {
		return err
	}
	_, err := c.nc.Write(pm.frame)
	return err
}

// Broadcast sends one message to every connection in conns, from any
// goroutine. The frame is encoded once; each loop that owns some of the
// connections gets one posted task that appends it to each of its
// connections' output. A connection that is closed or over its pending
// output limit is skipped. It returns an error only if a loop has
// stopped (its connections are then gone anyway).
func Broadcast(conns []*Conn, typ MessageType, p []byte) error {
	pm, err := NewPreparedMessage(typ, p)
	if err != nil {
		return err
	}
	return BroadcastPrepared(conns, pm)
}

// BroadcastPrepared is Broadcast for a message already prepared.
func BroadcastPrepared(conns []*Conn, pm *PreparedMessage) error {
	type batch struct {
		loop  *vnet.Loop
		conns []*Conn
	}
	var batches []batch
	for _, c := range conns {
		l := c.Loop()
		i := 0
		for i < len(batches) && batches[i].loop != l {
			i++
		}
		if i == len(batches) {
			batches = append(batches, batch{loop: l})
		}
		batches[i].conns = append(batches[i].conns, c)
	}
	var firstErr error
	for _, b := range batches {
		err := b.loop.Post(func() {
			for _, c := range b.conns {
				c.WritePrepared(pm)
			}
		})
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// A Group is a set of connections, spread over any number of loops, that
// messages are broadcast to: a chat room, a market data topic. Add and
// Remove run on the connection's loop (typically in OnOpen and OnClose);
// Broadcast runs from any goroutine. Each loop's members are touched only
// by that loop, so a broadcast takes no lock per connection: it posts one
// task to each loop with members.
type Group struct {
	mu    sync.Mutex
	loops []*groupLoop // one per loop that has had a member

	members atomic.Int64
	sent    atomic.Uint64
	skipped atomic.Uint64
}

// groupLoop holds a group's members on one loop; only that loop reads or
// writes set.
type groupLoop struct {
	loop *vnet.Loop
	set  map[*Conn]struct{}
	n    atomic.Int32 // len(set), for broadcasters on other goroutines
}

// NewGroup returns an empty group.
func NewGroup() *Group { return &Group{} }

// part returns the group's member set for l, creating it if create is
// set (else nil when l has none).
func (g *Group) part(l *vnet.Loop, create bool) *groupLoop {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.loops {
		if p.loop == l {
			return p
		}
	}
	if !create {
		return nil
	}
	p := &groupLoop{loop: l, set: make(map[*Conn]struct{})}
	g.loops = append(g.loops, p)
	return p
}

// forEachLoop posts fn to every loop that has members, with that loop's
// part, and returns the first error a post met.
func (g *Group) forEachLoop(fn func(p *groupLoop)) error {
	g.mu.Lock()
	parts := g.loops[:len(g.loops):len(g.loops)]
	g.mu.Unlock()
	var firstErr error
	for _, p := range parts {
		if p.n.Load() == 0 {
			continue // nothing to send there: no post, no wake-up
		}
		if err := p.loop.Post(func() { fn(p) }); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// Add puts c in the group. Call it on c's loop.
func (g *Group) Add(c *Conn) {
	p := g.part(c.Loop(), true)
	if _, ok := p.set[c]; !ok {
		p.set[c] = struct{}{}
		p.n.Add(1)
		g.members.Add(1)
	}
}

// Remove takes c out of the group. Call it on c's loop; OnClose is the
// usual place.
func (g *Group) Remove(c *Conn) {
	p := g.part(c.Loop(), false)
	if p == nil {
		return
	}
	if _, ok := p.set[c]; ok {
		delete(p.set, c)
		p.n.Add(-1)
		g.members.Add(-1)
	}
}

// Len returns the number of members.
func (g *Group) Len() int { return int(g.members.Load()) }

// Broadcast sends a message to every member, from any goroutine: the
// frame is encoded once and each loop with members gets one task.
func (g *Group) Broadcast(typ MessageType, p []byte) error {
	pm, err := NewPreparedMessage(typ, p)
	if err != nil {
		return err
	}
	return g.BroadcastPrepared(pm)
}

// BroadcastPrepared is Broadcast for a message already prepared.
func (g *Group) BroadcastPrepared(pm *PreparedMessage) error {
	return g.forEachLoop(func(p *groupLoop) {
		var sent, skipped uint64 // one update of the shared counters per loop
		for c := range p.set {
			if c.WritePrepared(pm) == nil {
				sent++
			} else {
				skipped++
			}
		}
		g.sent.Add(sent)
		g.skipped.Add(skipped)
	})
}

// CloseAll starts the close handshake on every member with code and
// reason, from any goroutine — before Server.Shutdown, with
// StatusGoingAway, so clients learn the server is leaving rather than
// seeing the TCP connection drop. Members leave the group as their
// OnClose runs (if OnClose calls Remove).
func (g *Group) CloseAll(code StatusCode, reason string) error {
	if !code.Valid() {
		return ErrInvalidCloseCode
	}
	return g.forEachLoop(func(p *groupLoop) {
		for c := range p.set {
			c.Close(code, reason)
		}
	})
}

// GroupStats counts a group's deliveries.
type GroupStats struct {
	Members int
	Sent    uint64 // messages appended to a member's output
	Skipped uint64 // members skipped: closing, or over the pending output limit
}

// Stats returns the group's counters.
func (g *Group) Stats() GroupStats {
	return GroupStats{Members: g.Len(), Sent: g.sent.Load(), Skipped: g.skipped.Load()}
}
