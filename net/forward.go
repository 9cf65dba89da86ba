package net

// Forwarding without the user-space copy.
//
// On io_uring, a connection's input arrives in the loop's provided receive
// buffers and OnData reads them in place. ForwardTo lets a handler pass the
// rest of such a buffer to another connection's output as it is: the
// buffer is not recycled to the ring when OnData returns but queued on the
// destination's output, sent from where the kernel received it, and
// recycled when that send completes. On epoll the same holds for the
// backend's read buffer (readLender): a kept one is replaced by another for
// the next read, and comes back after the send. Held buffers are missing
// from the ring, so their number is bounded per connection
// (maxHeldPerConn) and per loop (half the ring; epoll: epollMaxLent too);
// past either bound, and for small chunks that are
// cheaper to copy and batch behind output already queued, ForwardTo copies
// like Write.
//
// The buffer becomes a segment of the destination's output queue
// (outq.go), so every byte written before it is sent ahead of it and every
// byte written after it goes behind it.

// forwardMinZeroCopy is the smallest chunk ForwardTo sends in place behind
// pending output: below it one copy into the destination's output, which
// batches with the writes queued there into one send, is cheaper than a
// send of its own. Into an empty queue a chunk of any size goes in place:
// it would be a send of its own anyway (or the first iovec of a gathered
// one), and holding it skips the copy, the segment taken from the loop's
// cache and given back after the send. A relay of small messages (an L4
// proxy, 64 B requests) does exactly that per message: perf of
// examples/tcp-proxy, tcpload -size 64 -conns 64, put appendOut, memmove
// and the cache's Get/Put at about 15 % of the loop's user time.
const forwardMinZeroCopy = 4 << 10

// maxHeldPerConn bounds the receive buffers queued on one destination.
const maxHeldPerConn = 4

// ForwardTo moves the next n bytes of c's input (n <= 0 or more than is
// buffered: all of it) to dst's output and returns how many it moved. It
// is c.Next(n) followed by dst.Write of those bytes, except that on
// io_uring and epoll a large chunk that ForwardTo consumes up to its end
// is not copied: dst sends it straight from the receive buffer it arrived
// in, which returns to the loop's buffer ring (epoll: to the backend's
// read buffers) once the send completes. Use it in OnData to relay input
// (a proxy). Both connections must belong to the
// same loop. If dst cannot be written (ErrClosed), nothing is consumed.
// Over TLS (either side) the bytes are plaintext and always copied: the
// source's were decrypted, the destination encrypts them.
//
// ForwardTo moves what it is told to: it does not pace itself, and dst's
// water marks do not stop c, so the relay bounds dst's output. Forward at
// most limit − dst.OutputBuffered() bytes; when input is left over, or dst
// is at the limit, pause c with PauseRead until dst.OnDrain(limit/2, ...)
// resumes it; and turn the automatic marks off on both connections with
// SetWriteWaterMarks(0, 0), since they would stop the wrong side. The
// example shows the whole relay.
func (c *Conn) ForwardTo(dst *Conn, n int) (int, error) {
	if c.offLoop() {
		return 0, ErrNotOnLoop
	}
	if c.hold&holdData != 0 {
		return 0, nil // hidden until ReleaseData, as for Next
	}
	if err := dst.writable(); err != nil {
		return 0, err
	}
	if dst.loop != c.loop {
		panic("veloq: ForwardTo across loops")
	}
	if n <= 0 || n > len(c.view) {
		n = len(c.view)
	}
	if n == 0 {
		return 0, nil
	}
	l := c.loop
	if dst.out.len() >= l.cfg.RecvBufferSize {
		// dst is a receive behind: the relay will pause c, so c should
		// not take input far ahead of it (backend.pace).
		l.be.pace(c.slot)
	}
	if dst.tlsLayer() != nil {
		// Plaintext to be encrypted: Write's path, one copy into a record.
		if _, err := dst.write(c.view[:n]); err != nil {
			return 0, err
		}
		c.view = c.view[n:]
		return n, nil
	}
	if n == len(c.view) && l.canHold(c, dst, n) {
		dst.out.hold(l, c.view, uint16(l.chunk.bid))
		l.chunk.kept = true
		l.stats.heldBufs.Add(1)
		l.stats.inPlace.Add(uint64(n))
		c.view = nil
		l.wrote(dst)
		return n, nil
	}
	dst.out.write(l, c.view[:n])
	c.view = c.view[n:]
	l.wrote(dst)
	return n, nil
}

// canHold reports whether the n bytes that end c's view may be queued on
// dst in place: they are the rest of a receive buffer being presented to
// c right now, large enough or going into an empty queue
// (forwardMinZeroCopy), and neither dst nor the loop holds too many
// buffers already.
func (l *Loop) canHold(c, dst *Conn, n int) bool {
	return l.chunk.conn == c && l.chunk.bid >= 0 && !l.chunk.kept && !c.viewOwned &&
		(n >= forwardMinZeroCopy || dst.out.len() == 0) &&
		dst.out.held < maxHeldPerConn && l.stats.heldBufs.Load() < int64(l.cfg.RecvBuffers/2)
}

// recycleHeld gives a receive buffer queued by ForwardTo back to the
// backend once its bytes are sent or dropped.
func (l *Loop) recycleHeld(bid uint16) {
	l.be.recycle(bid)
	l.stats.heldBufs.Add(-1)
}
