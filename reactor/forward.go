package reactor

// Forwarding without the user-space copy.
//
// On io_uring, a connection's input arrives in the loop's provided receive
// buffers and OnData reads them in place. ForwardTo lets a handler pass the
// rest of such a buffer to another connection's output as it is: the
// buffer is not recycled to the ring when OnData returns but queued on the
// destination (Conn.held), sent from where the kernel received it, and
// recycled when that send completes. Held buffers are missing from the
// ring, so their number is bounded per connection (maxHeldPerConn) and per
// loop (half the ring); past either bound, and for small chunks that are
// cheaper to copy and batch, ForwardTo copies like Write.
//
// A destination's output is, in order: sending (what the backend is
// writing), held (receive buffers, oldest first), out (written bytes). A
// buffer is only queued while out is empty, so every byte written before
// it is ahead of it and every byte written after it goes behind it.

// forwardMinZeroCopy is the smallest chunk ForwardTo sends in place: below
// it one copy into the destination's output, which batches with other
// writes into one send, is cheaper than a send of its own.
const forwardMinZeroCopy = 4 << 10

// maxHeldPerConn bounds the receive buffers queued on one destination.
const maxHeldPerConn = 4

// heldBuf is a receive buffer (provided-buffer id bid) queued for sending.
type heldBuf struct {
	b   []byte
	bid uint16
}

// ForwardTo moves the next n bytes of c's input (n <= 0 or more than is
// buffered: all of it) to dst's output and returns how many it moved. It
// is c.Next(n) followed by dst.Write of those bytes, except that on
// io_uring a large chunk that ForwardTo consumes up to its end is not
// copied: dst sends it straight from the receive buffer it arrived in,
// which returns to the loop's buffer ring once the send completes. Use it
// in OnData to relay input (a proxy). Both connections must belong to the
// same loop. If dst cannot be written (ErrClosed), nothing is consumed.
func (c *Conn) ForwardTo(dst *Conn, n int) (int, error) {
	if dst.state != connOpen || dst.wrShut {
		return 0, ErrClosed
	}
	if dst.loop != c.loop {
		panic("reactor: ForwardTo across loops")
	}
	if n <= 0 || n > len(c.view) {
		n = len(c.view)
	}
	if n == 0 {
		return 0, nil
	}
	l := c.loop
	if n == len(c.view) && l.canHold(c, dst, n) {
		dst.held = append(dst.held, heldBuf{b: c.view, bid: l.chunk.bid})
		dst.heldBytes += n
		l.chunk.kept = true
		l.stats.heldBufs.Add(1)
		l.stats.inPlace.Add(uint64(n))
		l.markDirty(dst)
		c.view = nil
		return n, nil
	}
	dst.appendOut(c.view[:n])
	c.view = c.view[n:]
	return n, nil
}

// canHold reports whether the n bytes that end c's view may be queued on
// dst in place: they are the rest of the receive buffer being presented to
// c right now, large enough, nothing written to dst waits in out, and
// neither dst nor the loop holds too many buffers already.
func (l *Loop) canHold(c, dst *Conn, n int) bool {
	return l.chunk.conn == c && !l.chunk.kept && !c.viewOwned && n >= forwardMinZeroCopy &&
		len(dst.out) == 0 && len(dst.held) < maxHeldPerConn && l.stats.heldBufs.Load() < int64(l.cfg.RecvBuffers/2)
}

// nextSend takes the oldest queued output for sending: a held buffer, or
// else everything in out. It reports false when nothing is queued.
func (l *Loop) nextSend(c *Conn) bool {
	if len(c.held) > 0 {
		h := c.held[0]
		k := copy(c.held, c.held[1:]) // at most maxHeldPerConn entries
		c.held[k] = heldBuf{}
		c.held = c.held[:k]
		c.heldBytes -= len(h.b)
		c.sending, c.sendOff, c.sendHeld, c.sendBid = h.b, 0, true, h.bid
		return true
	}
	if len(c.out) == 0 {
		return false
	}
	c.sending, c.out, c.sendOff, c.sendHeld = c.out, nil, 0, false
	return true
}

// releaseSending gives back the buffer that was being sent: a held
// receive buffer to the ring, anything else to the cache. The kernel must
// be done with it.
func (l *Loop) releaseSending(c *Conn) {
	if c.sendHeld {
		l.be.recycle(c.sendBid)
		l.stats.heldBufs.Add(-1)
		c.sendHeld = false
	} else if c.sending != nil {
		l.cache.Put(c.sending)
	}
	c.sending, c.sendOff = nil, 0
}

// dropHeld recycles the receive buffers queued on c but not yet sent.
func (l *Loop) dropHeld(c *Conn) {
	for i, h := range c.held {
		l.be.recycle(h.bid)
		l.stats.heldBufs.Add(-1)
		c.held[i] = heldBuf{}
	}
	c.held, c.heldBytes = nil, 0
}
