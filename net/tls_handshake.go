package net

// The TLS handshake, the layer's first state (see tls.go), and where it
// runs.
//
// crypto/tls drives a handshake as straight-line code whose Reads must
// wait for the peer. A handshake runs in one of two places:
//
//   - On the loop (the default). The handshake is a coroutine (iter.Pull)
//     created and resumed by the loop's own goroutine, so it runs on the
//     loop's thread: when its Read finds no ciphertext it yields, handing
//     the loop back, and the loop resumes it (a step) once the peer's next
//     flight, its FIN or the end arrived. Its writes go straight to the
//     connection's output. No goroutine is parked on the peer and no
//     thread hands work to another. Steps wait in the loop's tls.steps and
//     run after a batch of events, within tlsStepBudget per iteration, so
//     a flood of handshakes delays established connections by about that
//     much per iteration, however many handshakes are waiting.
//   - Off the loop, on a goroutine of the handshake's own, when the
//     tls.Config has a callback that might block (an ACME client behind
//     GetCertificate) or WithTLSHandshakeOffLoop(true) asks for it. Its
//     transport blocks on a condition variable; what it writes is posted
//     to the loop when it waits for the peer; its outcome is posted too.
//     Goroutines that compute at once are bounded by the server's CPU
//     tokens (tlsServer.cpu).
//
// Either way the outcome lands on the loop: tlsFailed or tlsHandOver.

import (
	"crypto/tls"
	"fmt"
	"io"
	"iter"
	"net"

	"github.com/veloq/veloq/internal/panicstack"
)

// handshakePlace is where WithTLSHandshakeOffLoop asked handshakes to run.
type handshakePlace uint8

const (
	placeAuto    handshakePlace = iota // on the loop unless a callback might block
	placeOnLoop                        // WithTLSHandshakeOffLoop(false)
	placeOffLoop                       // WithTLSHandshakeOffLoop(true)
)

// onLoop reports whether handshakes with cfg run on the loop.
func (p handshakePlace) onLoop(cfg *tls.Config) bool {
	switch p {
	case placeOnLoop:
		return true
	case placeOffLoop:
		return false
	}
	return !mayBlock(cfg)
}

// mayBlock reports whether cfg has a callback that runs during a
// handshake and might wait on something (a network, a disk, a lock held
// elsewhere): a certificate manager fetching from an ACME server, a
// revocation check, a session store. Such a handshake must not run on
// the loop.
func mayBlock(cfg *tls.Config) bool {
	return cfg.GetCertificate != nil || cfg.GetConfigForClient != nil ||
		cfg.GetClientCertificate != nil || cfg.VerifyPeerCertificate != nil ||
		cfg.VerifyConnection != nil || cfg.WrapSession != nil ||
		cfg.UnwrapSession != nil || cfg.GetEncryptedClientHelloKeys != nil ||
		cfg.EncryptedClientHelloRejectionVerify != nil || cfg.KeyLogWriter != nil
}

// tlsStepBudget bounds the loop time one iteration spends on handshake
// steps; at least one step runs per iteration. A full TLS 1.3 handshake
// with an ECDSA P-256 certificate costs the server about 100 µs of
// public-key work (bench/tlscost), so about four run per iteration.
// Measured with bench/tlsflood.sh (one loop, 1,000 clients handshaking
// over and over, a keep-alive HTTPS ping beside them, 5 rounds): the
// ping's p50 0.09-0.11 ms and p99 2.9-3.2 ms (net/http: 191 ms); a budget
// of 0.15 ms left p99 where it was, so the tail is not the steps.
const tlsStepBudget = int64(500_000) // ns

// OnOpen starts the handshake, unless too many are running.
func (a *tlsAcceptor) OnOpen(c *Conn) {
	l := c.loop
	ts := a.ts
	t := c.tlsLayer() // a dial's, attached by DialTLS
	if t == nil {
		if ts.running.Add(1) > ts.max {
			ts.running.Add(-1)
			l.stats.tlsRefused.Add(1)
			c.err = ErrTLSHandshakeLimit
			l.closeGracefully(c)
			return
		}
		t = newTLSLayer(c, a.inner, ts, ts.onLoop)
		t.tc = tls.Server(&t.tr, ts.cfg)
	}
	h := t.tr.hs
	h.timer = c.AfterFunc(ts.timeout, func() {
		if !t.live() && c.state == connOpen {
			l.stats.tlsTimeouts.Add(1)
			l.abort(c, ErrTLSHandshakeTimeout)
		}
	})
	if h.client {
		t.start(c) // a client speaks first
	}
}

// newTLSLayer attaches a TLS layer to c: a server's counted in
// ts.running, a dial's (ts nil) counted nowhere and not CPU-limited.
func newTLSLayer(c *Conn, inner Handler, ts *tlsServer, onLoop bool) *tlsLayer {
	h := &tlsHandshake{ts: ts, inner: inner, onLoop: onLoop}
	if ts != nil {
		h.cpu = ts.cpu
	}
	h.cond.L = &h.mu
	t := &tlsLayer{tr: tlsTransport{c: c, hs: h}}
	c.tls = t
	return t
}

// OnData cannot run: a handshaking connection's input goes to the layer.
func (a *tlsAcceptor) OnData(c *Conn) {}

// OnEOF keeps the peer's FIN for after the handshake: a client may send
// its Finished, a request and its FIN in one go.
func (a *tlsAcceptor) OnEOF(c *Conn) {
	t := c.tls
	if t == nil {
		return
	}
	h := t.tr.hs
	if !h.started {
		// Nothing was said (a TCP health check): close, no handshake.
		c.err = io.EOF
		c.loop.closeGracefully(c)
		return
	}
	h.fin = true
	h.end(io.EOF)
	if h.onLoop {
		c.loop.tlsWake(c, t) // a Read waiting for the peer returns io.EOF
	}
}

// OnClose ends a handshake still waiting for the peer. A dial's handler
// hears of it (OnClose without OnOpen), as Loop.DialTLS says: the dialer
// holds the Conn, and on the loop nothing else tells it the connect or
// the handshake failed. An accepted connection's handler never knew it.
func (a *tlsAcceptor) OnClose(c *Conn, err error) {
	t := c.tls
	if t == nil {
		return
	}
	h := t.tr.hs
	h.handshakeOver()
	h.end(net.ErrClosed)
	c.loop.abandonHandshake(h)
	if h.client {
		a.inner.OnClose(c, err)
	}
}

// start begins the handshake: a server's with the first ciphertext from
// the peer rather than at the accept (a peer that connects and says
// nothing costs no handshake state, and an off-loop handshake's goroutine
// finds its ClientHello waiting instead of parking for it), a client's at
// the connect.
func (t *tlsLayer) start(c *Conn) {
	h := t.tr.hs
	if h.onLoop {
		h.started = true
		c.loop.tlsWake(c, t)
		return
	}
	if !h.started {
		h.started = true
		go handshake(c, t)
	}
}

// handshakeOver takes the connection out of its server's count of running
// handshakes, once. The count follows the loop's view (handshaking until
// handed over, failed or closed), so a place is free again as soon as the
// loop is done with a connection, not when its goroutine gets to run.
func (h *tlsHandshake) handshakeOver() {
	if h.ts != nil {
		h.ts.running.Add(-1)
		h.ts = nil
	}
}

// feed appends ciphertext for the handshake and returns how much waits.
func (h *tlsHandshake) feed(b []byte) (buffered int) {
	h.mu.Lock()
	h.raw = append(h.raw, b...)
	n := len(h.raw)
	h.cond.Signal()
	h.mu.Unlock()
	return n
}

// end makes the handshake's reads return err once the buffered ciphertext
// is read.
func (h *tlsHandshake) end(err error) {
	h.mu.Lock()
	if h.rerr == nil {
		h.rerr = err
	}
	h.cond.Broadcast()
	h.mu.Unlock()
}

// Close ends a handshake's reading: crypto/tls calls it when it gives up,
// and the loop (through end) when the connection goes away. A live
// connection's tls.Conn is never closed (the loop closes the socket).
func (t *tlsTransport) Close() error {
	if h := t.hs; h != nil {
		h.end(net.ErrClosed)
	}
	return nil
}

// ---- on the loop ----

// tlsWake queues a step of t's on-loop handshake, once, and makes sure
// the loop runs its queued steps after the current batch.
func (l *Loop) tlsWake(c *Conn, t *tlsLayer) {
	h := t.tr.hs
	if h.queued {
		return
	}
	h.queued = true
	l.tls.steps = append(l.tls.steps, c)
	if !l.tls.stepping {
		l.deferTLSSteps()
	}
}

// runTLSSteps runs the queued handshake steps, oldest first, until
// tlsStepBudget is spent; the rest wait for the next iteration, which
// polls the kernel without blocking first.
func (l *Loop) runTLSSteps() {
	l.tls.stepping = false
	// Answers the batch produced leave before handshakes compute.
	l.flush()
	run := l.tls.steps
	l.tls.steps = nil
	start := l.clock()
	for i, c := range run {
		if i > 0 && l.clock()-start >= tlsStepBudget {
			// Left over first, then those queued meanwhile.
			l.tls.steps = append(run[i:], l.tls.steps...)
			break
		}
		run[i] = nil
		if t := c.tlsLayer(); t != nil && !t.live() && t.tr.hs.queued {
			t.tr.hs.queued = false
			if c.state == connOpen {
				l.tlsStep(c, t)
			}
		}
	}
	if len(l.tls.steps) > 0 && !l.tls.stepping {
		l.deferTLSSteps()
	}
}

// deferTLSSteps has runTLSSteps run after the current batch, through one
// func value made once per loop rather than a method value per iteration.
func (l *Loop) deferTLSSteps() {
	if l.tls.run == nil {
		l.tls.run = l.runTLSSteps
	}
	l.tls.stepping = true
	l.Defer(l.tls.run)
}

// hsCoro is a coroutine that runs a loop's on-loop handshakes, one after
// another: between two it waits, idle, in the loop's tls.idle, keeping the
// stack a handshake grew (a fresh goroutine's stack grows by copying
// several times during a handshake: 3.7% of a server's CPU under a flood
// of full handshakes, measured with pprof).
type hsCoro struct {
	id   int // its threadID, or its goroutine on an unlocked loop (Loop.InLoop)
	next func() (struct{}, bool)
	stop func()
	t    *tlsLayer // the handshake it runs; nil once that ended
}

// maxIdleCoros bounds the idle handshake coroutines a loop keeps.
const maxIdleCoros = 32

// newHSCoro starts an idle coroutine on the loop's goroutine (a coroutine
// must be created and resumed on one thread, here the loop's locked one,
// or on one goroutine, an unlocked loop's, which then needs its id).
func newHSCoro(l *Loop) *hsCoro {
	co := &hsCoro{}
	co.next, co.stop = iter.Pull(func(yield func(struct{}) bool) {
		co.id = l.callerID()
		for yield(struct{}{}) { // idle until given a handshake
			t := co.t
			h := t.tr.hs
			h.yield = yield
			h.err = runHandshake(t.tc)
			h.yield = nil
			co.t = nil
		}
	})
	co.next() // to the first idle yield
	return co
}

// tlsStep resumes t's handshake until it waits for the peer again or
// ends.
func (l *Loop) tlsStep(c *Conn, t *tlsLayer) {
	h := t.tr.hs
	if h.co == nil {
		if h.err != nil {
			return // it failed; its connection is closing
		}
		if n := len(l.tls.idle); n > 0 {
			h.co = l.tls.idle[n-1]
			l.tls.idle[n-1] = nil
			l.tls.idle = l.tls.idle[:n-1]
		} else {
			h.co = newHSCoro(l)
		}
		h.co.t = t
	}
	if !l.resume(h) {
		return // waiting for the peer
	}
	if h.err != nil {
		l.tlsFailed(c, t, h.err)
		return
	}
	l.tlsHandOver(c, t)
}

// resume runs h's coroutine until its handshake waits for the peer
// (false) or ends (true); an ended handshake's coroutine goes back to the
// loop's idle ones.
func (l *Loop) resume(h *tlsHandshake) (ended bool) {
	co := h.co
	l.coro.Store(int64(co.id))
	co.next()
	l.coro.Store(0)
	if co.t != nil {
		return false
	}
	h.co = nil
	if len(l.tls.idle) < maxIdleCoros {
		l.tls.idle = append(l.tls.idle, co)
	} else {
		co.stop()
	}
	return true
}

// abandonHandshake ends an on-loop handshake whose connection closed
// while it waited for the peer: its Read returns net.ErrClosed (the
// transport has ended), and what it writes (an alert) goes nowhere.
func (l *Loop) abandonHandshake(h *tlsHandshake) {
	if h.co != nil {
		l.resume(h)
	}
}

// stopHandshakes ends the loop's idle handshake coroutines as it stops.
func (l *Loop) stopHandshakes() {
	for _, co := range l.tls.idle {
		co.stop()
	}
	l.tls.idle = nil
}

// readOnLoop is an on-loop handshake's Read: with no ciphertext buffered
// it yields to the loop until a step resumes it.
func (t *tlsTransport) readOnLoop(p []byte) (int, error) {
	h := t.hs
	for h.mustWait() {
		if !h.yield(struct{}{}) {
			return 0, net.ErrClosed // the loop stopped
		}
	}
	if len(h.raw) == 0 {
		return 0, h.rerr
	}
	return t.take(p), nil
}

// ---- off the loop ----

// handshake runs a connection's handshake on its own goroutine and posts
// the outcome to the loop.
func handshake(c *Conn, t *tlsLayer) {
	h := t.tr.hs
	h.takeCPU()
	err := runHandshake(t.tc)
	h.yieldCPU()
	l := c.loop
	// The last writes (an alert, a client's Finished) go in the same
	// post as the outcome, ahead of it.
	last := h.wbuf
	h.wbuf = nil
	_ = l.Post(func() { // ErrClosed: the loop stopped and closed c
		if len(last) > 0 {
			l.writeRaw(c, last)
		}
		if err != nil {
			l.tlsFailed(c, t, err)
			return
		}
		l.tlsHandOver(c, t)
	})
}

// runHandshake is tc.Handshake with a panic in a tls.Config callback
// turned into the handshake's error instead of ending the process.
func runHandshake(tc *tls.Conn) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = &handshakePanic{r, panicstack.Capture()}
		}
	}()
	return tc.Handshake()
}

// handshakePanic is the error of a handshake a tls.Config callback
// panicked in: the handshake fails, the panic is logged and counted as a
// handler's would be (Stats.Panics), and the loop goes on.
type handshakePanic struct {
	r     any
	stack panicstack.Stack
}

func (p *handshakePanic) Error() string { return fmt.Sprintf("panic: %v", p.r) }

// readOffLoop is an off-loop handshake's Read: it waits on the condition
// variable for the ciphertext the loop feeds.
func (t *tlsTransport) readOffLoop(p []byte) (int, error) {
	h := t.hs
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.mustWait() {
		// Waiting on the peer, who waits for what was written; another
		// handshake may compute meanwhile.
		if err := t.flush(); err != nil {
			return 0, err
		}
		h.yieldCPU()
		for h.mustWait() {
			h.cond.Wait()
		}
		h.mu.Unlock()
		h.takeCPU()
		h.mu.Lock()
	}
	if len(h.raw) == 0 {
		return 0, h.rerr
	}
	return t.take(p), nil
}

// flush posts what an off-loop handshake wrote since the last flush to
// the loop, which queues it on the connection's output.
func (t *tlsTransport) flush() error {
	h := t.hs
	if len(h.wbuf) == 0 {
		return nil
	}
	b, c := h.wbuf, t.c
	h.wbuf = nil
	return c.loop.Post(func() { c.loop.writeRaw(c, b) })
}

// takeCPU waits for a handshake CPU token; yieldCPU gives it back.
func (h *tlsHandshake) takeCPU() {
	if h.cpu != nil {
		h.cpu <- struct{}{}
	}
}

func (h *tlsHandshake) yieldCPU() {
	if h.cpu != nil {
		<-h.cpu
	}
}

// ---- the outcome, on the loop ----

// tlsFailed closes a connection whose handshake failed, after the alert
// crypto/tls queued before it gave up.
func (l *Loop) tlsFailed(c *Conn, t *tlsLayer, err error) {
	h := t.tr.hs
	h.timer.Stop()
	h.handshakeOver()
	if c.state != connOpen {
		return // timed out, or closed by the peer or the loop
	}
	l.stats.tlsErrors.Add(1)
	if p, ok := err.(*handshakePanic); ok {
		l.logPanic("TLS handshake", "*tls.Config callback", "closing its connection", p.r, p.stack)
	} else {
		l.log.Debug("veloq: TLS handshake failed", "remote", c.RemoteAddr(), "err", err)
	}
	c.err = fmt.Errorf("%w: handshake: %w", ErrTLS, err)
	l.closeGracefully(c)
}

// tlsHandOver makes a connection whose handshake succeeded live: the
// user's handler gets OnOpen, then the plaintext of whatever ciphertext
// came with or after the peer's Finished, then the FIN if one came.
func (l *Loop) tlsHandOver(c *Conn, t *tlsLayer) {
	h := t.tr.hs
	h.timer.Stop()
	// Counted as handshaking until the handler has it (after OnOpen), so
	// that a graceful shutdown that waits for its handler's connections
	// and then for the handshakes (vhttp's) never sees neither.
	defer h.handshakeOver()
	if c.state != connOpen {
		return
	}
	l.stats.tlsHandshakes.Add(1)
	// The handshake is over (its goroutine, if it had one, posted this
	// as its last act): what it kept goes with hs.
	h.mu.Lock()
	pending := h.raw
	h.mu.Unlock()
	t.tr.hs = nil
	t.alpn = t.tc.ConnectionState().NegotiatedProtocol
	t.ready.Store(true)
	c.h = h.inner
	if len(h.pending) > 0 {
		// What a client wrote while it connected goes first.
		if _, err := l.tlsWrite(c, t, h.pending); err != nil {
			l.abort(c, err)
			return
		}
	}
	if x := c.aux; x != nil && x.onConnect != nil {
		fn := x.onConnect
		x.onConnect = nil
		fn(nil)
	}
	l.callOpen(c)
	if c.state != connOpen {
		return
	}
	l.tlsInput(c, t, pending)
	if c.state == connOpen && h.fin {
		l.eofArrived(c)
	}
	l.clearHold(c, holdTLS)
}
