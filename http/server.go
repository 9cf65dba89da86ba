package http

import (
	"context"
	"errors"
	"fmt"
	"net"
	nethttp "net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/veloq/veloq/bufpool"
	"github.com/veloq/veloq/http/internal/h1"
	vnet "github.com/veloq/veloq/net"
)

// ErrServerClosed is returned by [Server.Listen] and
// [Server.ListenAndServe] after Shutdown or Close. It is this package's
// Server's error, as [vnet.ErrServerClosed] is a vnet.Server's: an HTTP
// Server never returns the latter, so test for the one of the server you
// started.
var ErrServerClosed = errors.New("http: server closed")

// ErrWriteTimeout closes a connection whose peer stopped reading for longer
// than the write timeout.
var ErrWriteTimeout = errors.New("http: write timeout")

// ErrBodyReadTimeout is the error a FromStd handler's Body.Read returns
// when the client sent no body bytes for the read-body timeout (see
// [WithReadBodyTimeout]). It matches os.ErrDeadlineExceeded, like a
// net/http read timeout.
var ErrBodyReadTimeout = fmt.Errorf("http: request body read timeout: %w", os.ErrDeadlineExceeded)

// errBodyBudget stops collecting a body once the server-wide budget for
// buffered bodies is spent; the client has been answered.
var errBodyBudget = errors.New("http: buffered bodies over budget")

// ErrHijackUnavailable is returned by ResponseWriter.Hijack when the
// handler does not run on the connection's loop (an offloaded handler).
var ErrHijackUnavailable = errors.New("http: Hijack is only available to handlers running on the loop")

// A Server serves HTTP/1.1 on veloq's loops (package vnet). Each connection
// belongs to one loop; a [Handler] runs inline on that loop unless it is
// offloaded (see [Offloaded], [WithOffload], [FromStd]).
//
// The server implements keep-alive, pipelining (the responses to all the
// requests parsed from one read go out in one send), HTTP/1.0, HEAD,
// Content-Length and chunked request bodies, Expect: 100-continue, the
// read-header, idle and write timeouts, a connection limit and graceful
// shutdown. Malformed requests are answered with the status of their
// [ProtocolError] and the connection is closed.
type Server struct {
	h Handler
	// hf is h when it is a HandlerFunc, called straight by the loop: the
	// interface call to HandlerFunc.ServeHTTP cost 13 instructions a
	// request (callgrind, BenchmarkServerFastPath).
	hf  HandlerFunc
	std *stdHandler // the root handler when it comes from FromStd
	// streamRoot is the root handler when it can tell from a request's
	// head that the request's body streams (StreamBody, a Router, Chain).
	streamRoot headRouter
	// onHead is set when the root handler may take a request on its head
	// (std or streamRoot): one test on the collected path for both.
	onHead bool
	opts   serverOptions
	// limits are the connections' parser limits: opts.limits, with the
	// FromStd body limit when the root handler streams bodies.
	limits Limits
	// stdSrv describes this server to net/http handlers, as the value of
	// net/http.ServerContextKey; it serves nothing itself.
	stdSrv *nethttp.Server
	// pipeBufs lends FromStd body pipes their buffers: a pipe gives its
	// buffer back whenever its reader waits (a stalled upload holds none)
	// and takes one again when bytes arrive, with no allocation.
	pipeBufs *bufpool.Pool

	mu     sync.Mutex
	ns     *vnet.Server
	loops  []*loopState // by loop ID
	closed bool
	done   chan struct{} // closed when Shutdown or Close starts
	// Once shutting down, ns stops in the background: it waits for every
	// connection, hijacked ones included, which Shutdown no longer waits
	// for. cutNet cuts what it waits for; netDone is closed once it has
	// stopped, and netErr (read after netDone) holds the errors met
	// closing listeners and loops.
	cutNet  context.CancelFunc
	netDone chan struct{}
	netErr  error

	shutting  atomic.Bool
	active    atomic.Int64
	bodyBytes atomic.Int64 // body buffer capacity held by all connections
}

// NewServer starts the loops that will serve h, as [vnet.NewServer] does,
// with the same errors (an invalid option, a loop that cannot start). It
// listens nowhere yet: call Listen (or use the package-level
// ListenAndServe), and Close or Shutdown to stop the loops.
func NewServer(h Handler, opts ...Option) (*Server, error) {
	s := &Server{pipeBufs: bufpool.NewPool(), done: make(chan struct{})}
	for _, opt := range opts {
		opt(&s.opts)
	}
	s.opts.setDefaults()
	if h == nil {
		h = HandlerFunc(func(w *ResponseWriter, _ *Request) { w.WriteHeader(StatusNotFound) })
	}
	if s.opts.offload != nil {
		if _, isStd := h.(*stdHandler); !isStd {
			h = Offloaded(s.opts.offload, h)
		}
	}
	s.h = h
	s.hf, _ = h.(HandlerFunc)
	s.std, _ = h.(*stdHandler)
	if s.std == nil {
		s.streamRoot, _ = h.(headRouter)
	}
	s.limits = s.opts.limits
	s.onHead = s.std != nil || s.streamRoot != nil
	s.stdSrv = &nethttp.Server{
		ReadHeaderTimeout: max(s.opts.readHeaderTimeout, 0),
		IdleTimeout:       max(s.opts.idleTimeout, 0),
		WriteTimeout:      max(s.opts.writeTimeout, 0),
		MaxHeaderBytes:    s.limits.MaxHeaderBytes,
	}
	if s.std != nil {
		s.limits.MaxBodyBytes = s.std.bodyLimit()
		s.stdSrv.Handler = s.std.h
	}
	ns, err := vnet.NewServer(netHandler{s}, s.opts.net...)
	if err != nil {
		return nil, err
	}
	loops := ns.Loops()
	s.loops = make([]*loopState, len(loops))
	for _, l := range loops {
		s.loops[l.ID()] = newLoopState(s)
	}
	s.ns = ns
	return s, nil
}

// Listen starts serving on network ("tcp", "tcp4", "tcp6" or "unix") and
// address, and returns the address it listens on (with the port chosen,
// for ":0") once connections are accepted, as [vnet.Server.Listen] does.
// It may be called more than once to serve several addresses.
func (s *Server) Listen(network, address string) (net.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrServerClosed
	}
	if s.stdSrv.Addr == "" {
		s.stdSrv.Addr = address
	}
	return s.ns.Listen(network, address)
}

// ListenAndServe serves h on address until ctx is done, then shuts the
// server down gracefully, giving the requests in progress up to grace to
// finish (as [vnet.ListenAndServe] does); past it the remaining connections
// are cut and context.DeadlineExceeded is returned. It is NewServer
// followed by [Server.ListenAndServe]; use those two to keep the Server
// (for Stats) while it runs.
func ListenAndServe(ctx context.Context, network, address string, h Handler, grace time.Duration, opts ...Option) error {
	s, err := NewServer(h, opts...)
	if err != nil {
		return err
	}
	return s.ListenAndServe(ctx, network, address, grace)
}

// ListenAndServe listens on network and address and serves until ctx is
// done, then shuts the server down gracefully, giving the requests in
// progress up to grace to finish; past it the remaining connections are
// cut and context.DeadlineExceeded is returned. The caller keeps the
// Server for Stats and the like while this runs:
//
//	s, err := vhttp.NewServer(h)
//	if err != nil {
//		return err
//	}
//	go s.ListenAndServe(ctx, "tcp", ":8080", 10*time.Second)
//
// When Shutdown or Close is called meanwhile, it returns ErrServerClosed
// at once (as net/http's does) and leaves the shutting down to that call.
// The server is stopped when it returns: if Listen fails it is closed, so
// that its loops do not outlive it, and the Listen error is returned.
func (s *Server) ListenAndServe(ctx context.Context, network, address string, grace time.Duration) error {
	if _, err := s.Listen(network, address); err != nil {
		if cerr := s.Close(); cerr != nil {
			return errors.Join(err, cerr)
		}
		return err
	}
	select {
	case <-ctx.Done():
	case <-s.done:
		return ErrServerClosed
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	return s.Shutdown(sctx)
}

// Addr returns the first listening address, or nil.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ns.Addr()
}

// NetServer returns the TCP server underneath, for its loops and
// statistics.
func (s *Server) NetServer() *vnet.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ns
}

// Shutdown stops the server gracefully: it stops accepting, runs the
// functions given to RegisterOnShutdown, closes idle keep-alive
// connections, lets the requests in progress finish (their responses carry
// "Connection: close"), and returns once the server's own connections are
// closed. If ctx ends first, every remaining connection is cut and ctx's
// error is returned.
//
// HTTP/2 connections get a GOAWAY, and a second, final one once a PING
// round trip has shown the client saw the first (RFC 9113 §6.8): the
// streams the client opened meanwhile are served, later ones refused,
// and the connection closes after its last stream. ctx's deadline is the
// drain timeout; Stats counts the connections that closed in time
// (Drained) and those cut at the deadline (Cut).
//
// Hijacked connections (by [ResponseWriter.Hijack], a FromStd handler's
// http.Hijacker, or so a WebSocket) whose handler is a
// [vnet.ShutdownHandler] are told with OnShutdown and waited for too: a
// WebSocket connection starts its close handshake with 1001 (going
// away). As in net/http, Shutdown does not wait for other hijacked
// connections: they stay open after it returns, and the loops stop once
// they have closed too. Use RegisterOnShutdown to tell them the server is
// going, and Close to cut them.
func (s *Server) Shutdown(ctx context.Context) error {
	return s.shutdown(ctx, true)
}

// shutdown is Shutdown; hooks says whether to run the RegisterOnShutdown
// functions, which Close does not (neither does net/http's).
func (s *Server) shutdown(ctx context.Context, hooks bool) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	ns := s.ns
	var netCtx context.Context
	netCtx, s.cutNet = context.WithCancel(context.Background())
	s.netDone = make(chan struct{})
	s.mu.Unlock()
	s.shutting.Store(true)
	for _, ls := range s.loops {
		ls.std.close()
	}
	if hooks {
		// Starts the RegisterOnShutdown functions, ours and those net/http
		// handlers registered through ServerContextKey, each on a
		// goroutine of its own; stdSrv has no listener or connection to
		// wait for.
		_ = s.stdSrv.Shutdown(ctx)
	} else {
		_ = s.stdSrv.Close()
	}
	// Stop accepting before returning, as net/http does, whatever the
	// connections left.
	lnErr := ns.CloseListeners()
	for _, l := range ns.Loops() {
		ls := s.loops[l.ID()]
		_ = l.Post(ls.closeIdle)
	}
	if ctx.Err() == nil {
		// Hijacked connections whose handler takes part (WebSocket's
		// sends its close 1001) are told, and waited for below.
		ns.NotifyShutdown()
	}
	// ns stops its loops once no connection is left; hijacked ones live
	// on those loops, so it waits for them until cutNet, while this waits
	// for the server's own connections.
	go func() {
		s.netErr = errors.Join(lnErr, closeErrors(ns.Shutdown(netCtx)))
		close(s.netDone)
	}()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	// Connections in a TLS handshake are the server's too (net/http
	// counts them in StateNew): a process that exits once Shutdown
	// returns would reset them. active is read first: a handshake ends
	// only after its connection is counted there.
	for s.active.Load() > 0 || ns.HandshakesInProgress() > 0 || ns.NumNotified() > 0 {
		select {
		case <-ctx.Done():
			s.cutNet()
			<-s.netDone
			return errors.Join(ctx.Err(), s.netErr)
		case <-s.netDone: // every connection closed, loops stopped
			return s.netErr
		case <-tick.C:
		}
	}
	return lnErr
}

// RegisterOnShutdown registers f to be called on a goroutine of its own
// when Shutdown starts, as net/http's Server.RegisterOnShutdown does: the
// place to close hijacked connections (a WebSocket's close handshake, say),
// which Shutdown does not wait for. Close does not call f.
func (s *Server) RegisterOnShutdown(f func()) {
	s.stdSrv.RegisterOnShutdown(f)
}

// Close stops the server at once, cutting every connection, hijacked ones
// included (also those a Shutdown that has returned left open), and
// returns once the loops have stopped, with the errors met closing.
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_ = s.shutdown(ctx, false) // its errors are in netErr too, complete once done is closed
	s.mu.Lock()
	cut, done := s.cutNet, s.netDone
	s.mu.Unlock()
	cut()
	<-done
	return s.netErr
}

// closeErrors returns the errors met closing from what vnet.Server's
// Shutdown returned, without context.Canceled: that only says the
// connections were cut, which was asked for.
func closeErrors(err error) error {
	if err == nil || err == context.Canceled {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return err
	}
	var keep []error
	for _, e := range j.Unwrap() {
		if e != context.Canceled {
			keep = append(keep, e)
		}
	}
	return errors.Join(keep...)
}

// Stats are a server's counters, summed over its loops.
type Stats struct {
	Conns       int64  // connections open now
	Accepted    uint64 // connections accepted
	Rejected    uint64 // connections refused by the connection limit
	Requests    uint64 // requests handled (responses written)
	Offloaded   uint64 // requests handled off the loop
	ProtoErrors uint64 // requests rejected by the parser
	Panics      uint64 // handler panics
	Timeouts    uint64 // connections closed by a timeout
	Hijacked    uint64 // connections handed to another handler by Hijack
	OverBudget  uint64 // requests refused (503) because buffered bodies were over budget
	// HTTP/2: connections that spoke it, streams opened, streams reset by
	// the server (a stream error), streams refused over the concurrency
	// bound, and connections ended with ENHANCE_YOUR_CALM (floods, rapid
	// reset, oversized header blocks). Its connection errors count in
	// ProtoErrors.
	HTTP2Conns, HTTP2Streams, HTTP2Resets, HTTP2Refused, HTTP2Calm uint64
	// BufferedBodyBytes is the body buffer capacity all connections hold
	// now, bounded by WithMaxBufferedBodyBytes.
	BufferedBodyBytes int64
	// Shutdown and Close: connections that closed by themselves or after
	// their last response (Drained), and connections cut at Shutdown's
	// deadline or by Close (Cut). Hijacked connections count in the
	// vnet.Server's Stats (and WebSocket's) instead.
	Drained, Cut uint64
}

// Stats returns the server's counters.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	loops := s.loops
	s.mu.Unlock()
	st := Stats{Conns: s.active.Load(), BufferedBodyBytes: s.bodyBytes.Load()}
	for _, ls := range loops {
		st.Accepted += ls.st.accepted.Load()
		st.Rejected += ls.st.rejected.Load()
		st.Requests += ls.st.requests.Load()
		st.Offloaded += ls.st.offloaded.Load()
		st.ProtoErrors += ls.st.protoErrors.Load()
		st.Panics += ls.st.panics.Load()
		st.Timeouts += ls.st.timeouts.Load()
		st.Hijacked += ls.st.hijacked.Load()
		st.OverBudget += ls.st.overBudget.Load()
		st.HTTP2Conns += ls.st.h2conns.Load()
		st.HTTP2Streams += ls.st.h2streams.Load()
		st.HTTP2Resets += ls.st.h2resets.Load()
		st.HTTP2Refused += ls.st.h2refused.Load()
		st.HTTP2Calm += ls.st.h2calm.Load()
		st.Drained += ls.st.drained.Load()
		st.Cut += ls.st.cut.Load()
	}
	return st
}

// loopStats are one loop's counters: written by the loop only, read by
// Stats from any goroutine.
type loopStats struct {
	accepted, rejected, requests, offloaded atomic.Uint64
	protoErrors, panics, timeouts, hijacked atomic.Uint64
	overBudget                              atomic.Uint64
	h2conns, h2streams, h2resets, h2refused atomic.Uint64
	h2calm, drained, cut                    atomic.Uint64
}

// loopState is what the connections of one loop share. Only that loop
// touches it (except the counters).
type loopState struct {
	srv *Server
	// Detached answers' states free for reuse, and the header a dead
	// Responder hands out (detach.go).
	detFree    []*detached
	detScratch ResponseHeader
	// dates holds the Date header's value for the current second, which
	// ends when the loop clock (Loop.Clock) reaches dateUntil.
	dates     h1.DateCache
	dateUntil int64
	head200   []byte    // status line, Date and Server of a plain 200 (response.appendHead)
	heads     headCache // the last HTTP/1 head written, cleared with the Date
	dateText  string    // the Date value as a string, for HTTP/2; "" until asked for
	req       Request
	w         ResponseWriter
	body      []byte    // the inline writer's body buffer
	scratch   []byte    // serialized heads
	iov       [3][]byte // Writev arguments, kept to avoid an allocation
	// hdrScratch builds FromStd request headers.
	hdrScratch []byte
	conns      connList
	timers     connTimers // the connections' deadlines (conn_timers.go)
	// served counts the requests answered in this loop iteration;
	// publish adds them to st.requests once, after the batch, instead of
	// one atomic add per request.
	served  uint64
	publish func()
	spare   []*conn     // records of hijacked connections, for reuse
	reqFree []*reqState // request states of connections gone idle, for reuse (conn.begin)
	h2      *h2Shared   // HTTP/2 decoding and encoding state, from the first HTTP/2 connection
	std     stdWorkers  // goroutines that run this loop's FromStd handlers
	stdReq  Request     // a FromStd request's head fields, as writeHead takes them
	st      loopStats
	done    Completion // the completion hook's argument, reused
	// armed is set while a serveLoop's deferred disarm is on the stack;
	// inline is then its connection, whose handlers serve calls without
	// a defer of their own, or nil while such a handler runs, with the
	// input its request consumes.
	armed         bool
	inline        *conn
	inlineConsume int
	// pend holds the answers serveLoop's batch wrote for pendConn and
	// not yet queued on it (writeResponse, flushPending): one Write per
	// batch. Its capacity is fixed, maxPending, so it is never grown;
	// it is made for the first batch (a Server holds no more until it
	// serves).
	pend     []byte
	pendConn *conn
	batched  int      // answers queued straight in the batch so far
	_        [64]byte // keep the next loop's counters off this cache line
}

func newLoopState(s *Server) *loopState {
	ls := &loopState{srv: s, body: make([]byte, 0, 4<<10), scratch: make([]byte, 0, 1<<10)}
	ls.publish = func() {
		ls.st.requests.Add(ls.served)
		ls.served = 0
	}
	return ls
}

// maxSpareConns bounds the conn records a loop keeps for reuse.
const maxSpareConns = 64

// newConn returns a zeroed conn record, reusing one a hijacked connection
// left: a WebSocket server's connections all pass through one, and
// without reuse each would leave its record as garbage.
func (ls *loopState) newConn() *conn {
	if n := len(ls.spare); n > 0 {
		cs := ls.spare[n-1]
		ls.spare[n-1] = nil
		ls.spare = ls.spare[:n-1]
		return cs
	}
	return new(conn)
}

// recycle keeps cs for newConn. Only a record nothing else refers to may
// come here: one handed over by Hijack (no timer, no offloaded work, no
// FromStd exchange).
func (ls *loopState) recycle(cs *conn) {
	if len(ls.spare) < maxSpareConns {
		*cs = conn{}
		ls.spare = append(ls.spare, cs)
	}
}

// countServed counts a request answered on loop l (inline, streamed,
// through FromStd, or hijacked); Stats sees it after the iteration.
func (ls *loopState) countServed(l *vnet.Loop) {
	if ls.served == 0 {
		l.Defer(ls.publish)
	}
	ls.served++
}

// newConnGrace is how long a new connection may stay silent and still be
// waited for by Shutdown: net/http's figure.
const newConnGrace = 5 * time.Second

// closeIdle closes the keep-alive connections waiting for their next
// request; the others close after their current response since the
// server is shutting down. A new connection (phaseNew) is not idle: its
// client connected to send a request, which may be in the socket already,
// unread; closing it would answer with EOF, or a reset for the unread
// bytes. It gets its answer with "Connection: close", or is closed at its
// head timeout; one that has said nothing for newConnGrace is closed, as
// net/http treats StateNew connections (issue golang/go#22682). This is what
// lets a hot upgrade (package upgrade) lose no connection the old
// process accepted just before it stopped: 2 to 5 of them per 5 upgrades
// were cut under TestUpgradeUnderLoad before.
func (ls *loopState) closeIdle() {
	for cs := ls.conns.head; cs != nil; {
		next := cs.next
		switch cs.phase {
		case phaseIdle:
			cs.c.Close()
		case phaseNew:
			if cs.now()-cs.phaseStart >= int64(newConnGrace) {
				cs.c.Close()
			}
		case phaseH2:
			cs.h2.shutdown()
		}
		cs = next
	}
}

// connList is an intrusive list of a loop's connections.
type connList struct{ head *conn }

func (l *connList) add(cs *conn) {
	cs.next = l.head
	if l.head != nil {
		l.head.prev = cs
	}
	l.head = cs
}

func (l *connList) remove(cs *conn) {
	if cs.prev != nil {
		cs.prev.next = cs.next
	} else if l.head == cs {
		l.head = cs.next
	}
	if cs.next != nil {
		cs.next.prev = cs.prev
	}
	cs.prev, cs.next = nil, nil
}

// netHandler adapts the server to the TCP layer's callbacks.
type netHandler struct{ s *Server }

func (h netHandler) OnOpen(c *vnet.Conn) {
	s := h.s
	ls := s.loops[c.Loop().ID()]
	ls.st.accepted.Add(1)
	n := s.active.Add(1)
	cs := ls.newConn()
	cs.ls, cs.c = ls, c
	c.SetValue(cs)
	ls.conns.add(cs)
	cs.phase = phaseNew
	cs.phaseStart = cs.now()
	// The loop's connTimers, not a timer per connection (conn_timers.go).
	ls.timers.arm(cs, cs.phaseStart+int64(s.firstTimeout()))
	switch {
	case s.opts.maxConns > 0 && n > int64(s.opts.maxConns):
		ls.st.rejected.Add(1)
		if s.opts.reject503 {
			cs.fail(StatusServiceUnavailable)
		} else {
			c.Close()
		}
	case !s.opts.noHTTP2 && c.NegotiatedProtocol() == "h2":
		cs.startH2()
	}
}

func (h netHandler) OnData(c *vnet.Conn) { c.Value().(*conn).onData() }

func (h netHandler) OnEOF(c *vnet.Conn) { c.Value().(*conn).onEOF() }

func (h netHandler) OnClose(c *vnet.Conn, err error) {
	cs := c.Value().(*conn)
	cs.ls.conns.remove(cs)
	cs.ls.srv.active.Add(-1)
	if cs.ls.srv.shutting.Load() {
		if errors.Is(err, vnet.ErrClosed) {
			cs.ls.st.cut.Add(1)
		} else {
			cs.ls.st.drained.Add(1)
		}
	}
	cs.ls.timers.stop(cs)
	cs.onClose(err)
}
