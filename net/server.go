package net

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/veloq/veloq/bufpool"
	"github.com/veloq/veloq/internal/affinity"
	"github.com/veloq/veloq/internal/sock"
)

// ErrServerClosed is returned by Listen and Dial after Shutdown or Close.
// It is a vnet.Server's error; the HTTP server has its own
// (vhttp.ErrServerClosed) for its own Listen.
var ErrServerClosed = errors.New("veloq: server closed")

// Server is a group of reactor loops serving one handler. It can listen
// on several addresses, and dial outbound connections onto its loops.
type Server struct {
	h       Handler
	opts    options
	loops   []*Loop
	backend Backend

	mu        sync.Mutex
	listeners []*Listener
	addrs     []net.Addr
	closed    bool
	done      chan struct{} // closed when Shutdown or Close starts

	rr atomic.Uint32
}

// NewServer starts the loops that will serve h. It listens nowhere yet:
// call Listen (or use the package-level Listen).
func NewServer(h Handler, opts ...Option) (*Server, error) {
	if h == nil {
		return nil, errors.New("veloq: nil handler")
	}
	o := defaultOptions()
	for _, opt := range opts {
		opt(&o)
	}
	if o.loops <= 0 {
		return nil, fmt.Errorf("veloq: loops must be positive, got %d", o.loops)
	}
	if ts := o.tls; ts != nil {
		switch c := ts.cfg; {
		case c == nil:
			return nil, errors.New("veloq: WithTLS needs a tls.Config (a TLS option was given without it)")
		case len(c.Certificates) == 0 && c.GetCertificate == nil && c.GetConfigForClient == nil:
			return nil, errors.New("veloq: WithTLS: the tls.Config has no certificate (Certificates, GetCertificate or GetConfigForClient)")
		}
		ts.start(o.loops)
		h = &tlsAcceptor{ts: ts, inner: h}
		if o.cfg.RecvBufferSize == 0 {
			o.cfg.RecvBufferSize = tlsRecvBufferSize
		}
	}
	if o.cfg.Backend == "" {
		o.cfg.Backend = BackendAuto
	}
	if _, err := ParseBackend(string(o.cfg.Backend)); err != nil {
		return nil, err
	}
	if o.cfg.Logger == nil {
		o.cfg.Logger = slog.Default()
	}
	if o.cfg.Pool == nil {
		o.cfg.Pool = bufpool.NewPool()
	}
	if o.cfg.Backend == BackendAuto {
		// Decide once here so a fallback's reason is logged once, not per loop.
		o.cfg.Backend = autoBackend(o.cfg.Logger)
	}
	// A portable loop waits in the Go scheduler, not in the kernel holding
	// its P, so it needs no spare one; with one, the scheduler ran its
	// helpers on a second thread that woke the loop's (a 64-connection
	// echo on one CPU: 0.14-0.19 voluntary context switches per echo with
	// the spare P, 0.07-0.09 without).
	if o.procs && o.cfg.Backend != BackendPortable && runtime.GOMAXPROCS(0) <= o.loops {
		o.cfg.Logger.Debug("veloq: raising GOMAXPROCS above the loop count", "from", runtime.GOMAXPROCS(0), "to", o.loops+1)
		runtime.GOMAXPROCS(o.loops + 1)
	}
	var cpus []int
	if o.pin {
		var err error
		if cpus, err = affinity.Allowed(); err != nil {
			return nil, err
		}
	}
	s := &Server{h: h, opts: o, backend: o.cfg.Backend, done: make(chan struct{})}
	for i := 0; i < o.loops; i++ {
		cfg := o.cfg
		if o.pin {
			cfg.PinCPU, cfg.CPU = true, cpus[i%len(cpus)]
		}
		l, err := NewLoop(i, cfg)
		if err != nil {
			return nil, errors.Join(err, s.closeLoops())
		}
		s.loops = append(s.loops, l)
	}
	return s, nil
}

// Listen starts a server for h on network ("tcp", "tcp4", "tcp6" or
// "unix") and address, and returns once it accepts connections.
func Listen(network, address string, h Handler, opts ...Option) (*Server, error) {
	s, err := NewServer(h, opts...)
	if err != nil {
		return nil, err
	}
	if _, err := s.Listen(network, address); err != nil {
		return nil, errors.Join(err, s.Close())
	}
	return s, nil
}

// ListenAndServe runs a server until ctx is done, then shuts it down
// gracefully, giving connections up to grace to finish. It is
// NewServer followed by [Server.ListenAndServe]; use those two to keep
// the Server (for Stats, Addr or Dial) while it runs.
func ListenAndServe(ctx context.Context, network, address string, h Handler, grace time.Duration, opts ...Option) error {
	s, err := NewServer(h, opts...)
	if err != nil {
		return err
	}
	return s.ListenAndServe(ctx, network, address, grace)
}

// ListenAndServe listens on network and address and serves until ctx is
// done, then shuts the server down gracefully, giving connections up to
// grace to finish; past it the rest are cut and context.DeadlineExceeded
// is returned. It is the one-call form for a server built with NewServer,
// which the caller keeps for Stats and the like while this runs:
//
//	s, _ := vnet.NewServer(h)
//	go s.ListenAndServe(ctx, "tcp", ":7000", 10*time.Second)
//
// When Shutdown or Close is called meanwhile, it returns ErrServerClosed
// at once (as net/http's does) and leaves the shutting down to that call.
// The server is stopped when it returns: if Listen fails it is closed, so
// that its loops do not outlive a server nobody serves with, and the
// Listen error is returned.
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

// Listen adds a listening address. With BalanceReusePort (the default,
// TCP only, Linux only) every loop gets its own SO_REUSEPORT socket;
// otherwise loop 0 accepts and hands connections to the loops. It returns the bound address
// (useful with port 0).
func (s *Server) Listen(network, address string) (net.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrServerClosed
	}
	if isPacketNetwork(network) {
		return nil, fmt.Errorf("veloq: listen %s %s: %w: a datagram network (use ListenPacket)", network, address, sock.ErrNetwork)
	}
	a, err := sock.Resolve(network, address)
	if err != nil {
		return nil, err
	}
	perLoop := s.opts.balance == BalanceReusePort && reusePortSpreads && network != "unix" && len(s.loops) > 1
	if perLoop && !s.opts.sharePort {
		// SO_REUSEPORT would let this server bind a port another server
		// already listens on and take half of its connections, silently.
		// Refuse like Go's net and nginx do, unless sharing was asked for.
		if err := sock.ProbeBind(a); err != nil {
			return nil, fmt.Errorf("veloq: listen %s %s: %w", network, address, err)
		}
	}
	// A Unix socket file this server binds is its to remove on close
	// (see listener.unlink); an abstract name ('@') has no file.
	var unlink string
	if ua, ok := a.Net.(*net.UnixAddr); ok && ua.Name != "" && ua.Name[0] != '@' {
		unlink = ua.Name
	}
	var added []*Listener
	undo := func() {
		for _, ln := range added {
			ln.Close()
		}
	}
	var bound net.Addr
	for i, l := range s.loops {
		if i > 0 && !perLoop {
			break
		}
		if i == 1 {
			// Bind the others to the port the first one got (port 0).
			if a, err = sock.Resolve(network, bound.String()); err != nil {
				undo()
				return nil, err
			}
		}
		fd, local, err := sock.Listen(a, perLoop || s.opts.sharePort, s.opts.backlog)
		if err != nil {
			undo()
			return nil, fmt.Errorf("veloq: listen %s %s: %w", network, address, err)
		}
		if bound == nil {
			bound = local
		}
		var dispatch func() *Loop
		if !perLoop && len(s.loops) > 1 {
			dispatch = s.pick
		}
		ln, err := l.addListener(fd, network, s.h, dispatch, unlink)
		if err != nil {
			closeFD(fd)
			if unlink != "" {
				_ = syscall.Unlink(unlink) // bound above, never handed to a listener
			}
			undo()
			return nil, err
		}
		added = append(added, ln)
	}
	s.listeners = append(s.listeners, added...)
	s.addrs = append(s.addrs, bound)
	return bound, nil
}

// pick chooses a loop for a connection accepted by the single acceptor.
func (s *Server) pick() *Loop {
	if s.opts.balance == BalanceRoundRobin {
		return s.loops[int(s.rr.Add(1)-1)%len(s.loops)]
	}
	return s.leastLoaded()
}

// leastLoaded returns the loop with the fewest open connections.
func (s *Server) leastLoaded() *Loop {
	best := s.loops[0]
	for _, l := range s.loops[1:] {
		if l.NumConns() < best.NumConns() {
			best = l
		}
	}
	return best
}

// Addr returns the first listening address, or nil.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.addrs) == 0 {
		return nil
	}
	return s.addrs[0]
}

// Backend returns the backend the loops run on.
func (s *Server) Backend() Backend { return s.backend }

// Loops returns the server's loops.
func (s *Server) Loops() []*Loop { return s.loops }

// NumConns returns the number of open connections over all loops.
func (s *Server) NumConns() int {
	n := 0
	for _, l := range s.loops {
		n += l.NumConns()
	}
	return n
}

// HandshakesInProgress returns the number of TLS handshakes of accepted
// connections in progress (0 without WithTLS): connections the handler has
// not seen yet. A protocol server's graceful shutdown, which waits for its
// handler's connections, waits for these too, as net/http's does for
// connections in StateNew; a connection stays counted until its handler's
// OnOpen has returned.
func (s *Server) HandshakesInProgress() int {
	if s.opts.tls == nil {
		return 0
	}
	return int(s.opts.tls.running.Load())
}

// Stats returns every loop's counters.
func (s *Server) Stats() []Stats {
	out := make([]Stats, len(s.loops))
	for i, l := range s.loops {
		out[i] = l.Stats()
	}
	return out
}

// Dial connects to address from the loop with the fewest connections and
// serves the connection with h. It waits until the connection is
// established (OnOpen has run) or ctx ends. From inside a handler, use
// c.Loop().Dial instead: it does not block.
func (s *Server) Dial(ctx context.Context, network, address string, h Handler) (*Conn, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrServerClosed
	}
	return s.leastLoaded().Dial(ctx, network, address, h)
}

// DialTLS is Dial for a TLS connection (see Loop.DialTLS): it waits until
// the handshake is done (OnOpen has run) or failed.
func (s *Server) DialTLS(ctx context.Context, network, address string, cfg *tls.Config, h Handler) (*Conn, error) {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrServerClosed
	}
	return s.leastLoaded().DialTLS(ctx, network, address, cfg, h)
}

// Shutdown stops the server gracefully, in the order a deploy needs: it
// stops accepting (closes every listener), calls OnShutdown on every open
// connection whose handler is a ShutdownHandler so that it ends the
// connection its own way, waits for the connections to close until ctx
// ends, then closes what is left (OnClose sees ErrClosed) and stops the
// loops, releasing every fd, ring and goroutine. The connections that
// closed in time count in Stats.Drained, those closed at ctx's end in
// Stats.Cut: ctx's deadline is the drain timeout.
//
// It returns ctx's error if connections had to be cut, joined with any
// error met closing listeners and loops. Calls after the first return nil.
func (s *Server) Shutdown(ctx context.Context) error {
	cut, err := s.shutdown(ctx)
	return errors.Join(cut, err)
}

// shutdown is Shutdown, returning the context's error (connections cut)
// apart from the errors met closing.
func (s *Server) shutdown(ctx context.Context) (cut, closeErr error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, nil
	}
	s.closed = true
	close(s.done)
	s.mu.Unlock()
	errs := []error{s.CloseListeners()}
	if ctx.Err() == nil { // not Close: drain
		s.NotifyShutdown()
	}
	var err error
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for s.NumConns() > 0 {
		select {
		case <-ctx.Done():
			err = ctx.Err()
		case <-tick.C:
			continue
		}
		break
	}
	errs = append(errs, s.closeLoops())
	return err, errors.Join(errs...)
}

// CloseListeners stops accepting: it closes every listening socket (and
// removes a Unix socket file the server bound) and returns once they are
// closed, with the errors met. Open connections and the loops go on; a
// protocol server that waits for some connections and not others during
// its own graceful shutdown (as vhttp's does for hijacked ones) calls it
// before that wait, then Shutdown. Listen may add addresses again.
func (s *Server) CloseListeners() error {
	s.mu.Lock()
	lns := s.listeners
	s.listeners = nil
	s.mu.Unlock()
	var errs []error
	for _, ln := range lns {
		errs = append(errs, ln.Close())
	}
	return errors.Join(errs...)
}

// Close stops the server at once: listeners and connections are closed
// (handlers see OnClose with ErrClosed) and the loops stop. It returns the
// errors met closing listeners and loops (nil normally).
func (s *Server) Close() error {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.shutdown(ctx)
	return err
}

func (s *Server) closeLoops() error {
	errs := make([]error, len(s.loops))
	var wg sync.WaitGroup
	for i, l := range s.loops {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = l.Close() }()
	}
	wg.Wait()
	return errors.Join(errs...)
}
