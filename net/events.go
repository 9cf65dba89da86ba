package net

import "github.com/veloq/veloq/internal/sock"

// The loop's implementation of sink: each report of the backend, mapped
// from a slot to its connection (or listener) and handed to the code that
// owns the state it changes. Nothing here reaches back into the backend
// except through the backend interface.

// tick refreshes the loop clock on the first report after a poll and then
// every 16 reports, so timeouts and activity stamps stay current through
// a long batch without a clock read per event.
func (l *Loop) tick() {
	if l.reports&15 == 0 {
		l.now = l.clock()
	}
	l.reports++
}

func (l *Loop) accepted(idx uint32, fd int, peer sock.Peer) {
	l.tick()
	l.onAccept(l.listeners[idx], fd, peer)
}

func (l *Loop) acceptFailed(idx uint32, err error) bool {
	l.tick()
	return l.acceptBackOff(l.listeners[idx], err)
}

func (l *Loop) listenerClosed(idx uint32) { l.closedListener(l.listeners[idx]) }

func (l *Loop) connected(slot uint32, err error) {
	l.tick()
	l.onConnected(l.conns.get(slot), err)
}

func (l *Loop) input(slot uint32, b []byte, bid int32) bool {
	l.tick()
	l.ctr.bytesIn += uint64(len(b))
	return l.onInput(l.conns.get(slot), b, bid)
}

func (l *Loop) eof(slot uint32) {
	l.tick()
	l.onEOF(l.conns.get(slot))
}

func (l *Loop) sent(slot uint32, n int) {
	l.tick()
	l.onSent(l.conns.get(slot), n)
}

func (l *Loop) failed(slot uint32, err error) {
	l.tick()
	l.abort(l.conns.get(slot), err)
}

func (l *Loop) ready(slot uint32, out bool) {
	l.tick()
	c := l.conns.get(slot)
	if out {
		if s := c.spliceDst(); s != nil && s.waitOut {
			s.waitOut = false
			l.pump(s)
		}
		if x := c.aux; x != nil && x.file != nil && x.file.waitOut {
			l.fileWritable(x.file)
		}
		return
	}
	if s := c.spliceSrc(); s != nil {
		s.started = true
		l.pump(s)
	}
}

func (l *Loop) released(slot uint32) { l.finalize(l.conns.get(slot)) }
