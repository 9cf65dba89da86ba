package net

import (
	"crypto/tls"
	"log/slog"
	"reflect"
	"runtime"
	"time"
)

// Balance says how accepted connections are spread over loops.
type Balance int

const (
	// BalanceReusePort gives every loop its own SO_REUSEPORT listener; the
	// kernel spreads connections by hashing. The default. Linux only:
	// elsewhere the kernel does not spread them, so loop 0 accepts and
	// hands each connection to the loop with the fewest (as
	// BalanceLeastConns).
	BalanceReusePort Balance = iota
	// BalanceRoundRobin has loop 0 accept and hand connections to loops in
	// turn.
	BalanceRoundRobin
	// BalanceLeastConns has loop 0 accept and hand each connection to the
	// loop with the fewest open connections.
	BalanceLeastConns
)

type options struct {
	tls       *tlsServer // nil: plaintext
	loops     int
	balance   Balance
	pin       bool
	backlog   int
	procs     bool // raise GOMAXPROCS above the loop count
	sharePort bool
	cfg       Config
	pkt       packetOptions // datagram sockets (udp_options.go)
}

// Option configures a Server.
type Option func(*options)

func defaultOptions() options {
	return options{
		loops: runtime.NumCPU(),
		procs: true,
		pkt:   defaultPacketOptions(),
	}
}

// WithLoops sets the number of reactor loops. Default: the number of CPUs
// the process may run on.
func WithLoops(n int) Option { return func(o *options) { o.loops = n } }

// WithBackend chooses io_uring, epoll, portable (Go's own net package:
// for development, not speed; no SpliceTo, SendFile copies), or auto
// (the default: io_uring when the kernel allows it, epoll otherwise, with
// one log line saying why).
func WithBackend(b Backend) Option { return func(o *options) { o.cfg.Backend = b } }

// WithBalance chooses how connections are spread over loops.
func WithBalance(b Balance) Option { return func(o *options) { o.balance = b } }

// WithGOMAXPROCS says whether NewServer may raise runtime.GOMAXPROCS to
// the number of loops plus one when it is lower (default true). Every loop
// goroutine holds a P for its whole life, also while it waits in the
// kernel; with no P to spare, the rest of the program (timers, offloaded
// work, the garbage collector's workers) runs only when Go's monitor
// thread takes a P back from a waiting loop, which it then checks for
// every 20 µs: measured at up to a quarter of a busy loop's CPU. A
// portable backend's loop waits in the Go scheduler, without its P, and
// gets no spare one. Turn it off when the program manages GOMAXPROCS
// itself.
func WithGOMAXPROCS(adjust bool) Option { return func(o *options) { o.procs = adjust } }

// WithBatchWait sets how long a loop may hold a wake-up back to take
// events in a batch when many connections are busy (see
// Config.BatchWait). Default 20µs; negative turns batching off.
func WithBatchWait(d time.Duration) Option { return func(o *options) { o.cfg.BatchWait = d } }

// WithPin pins loop i to the i-th CPU the process may run on. Linux
// only: elsewhere it does nothing (macOS cannot bind a thread to a CPU).
func WithPin(on bool) Option { return func(o *options) { o.pin = on } }

// WithNoDelay sets TCP_NODELAY on connections. Default true; false leaves
// Nagle's algorithm on (Config.Nagle).
func WithNoDelay(on bool) Option { return func(o *options) { o.cfg.Nagle = !on } }

// WithKeepAlive enables TCP keep-alive after d of idleness (0: off).
func WithKeepAlive(d time.Duration) Option { return func(o *options) { o.cfg.KeepAlive = d } }

// WithReadBufferCap bounds the unconsumed input per connection. Default 4 MiB.
func WithReadBufferCap(n int) Option { return func(o *options) { o.cfg.ReadBufferCap = n } }

// WithWriteWaterMarks sets the pending-output marks: a write above high
// stops reading from the peer at once, and reading resumes when the output
// drains to low. Default 32 KiB / 64 KiB. Conn.SetWriteWaterMarks
// overrides them per connection.
func WithWriteWaterMarks(low, high int) Option {
	return func(o *options) { o.cfg.WriteLowWater, o.cfg.WriteHighWater = low, high }
}

// WithConnIdleTimeout closes a connection that has had no traffic, in
// either direction, for d (Config.IdleTimeout); OnClose gets
// ErrIdleTimeout. Default off.
func WithConnIdleTimeout(d time.Duration) Option {
	return func(o *options) { o.cfg.IdleTimeout = d }
}

// WithCloseTimeout bounds how long a graceful Close waits for output.
func WithCloseTimeout(d time.Duration) Option { return func(o *options) { o.cfg.CloseTimeout = d } }

// WithLogger sets the logger. Default slog.Default().
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.cfg.Logger = l } }

// WithCompletionBudget caps the backend completions a loop dispatches to
// handlers per iteration (Config.Budget, default 64). An engine setting:
// most servers never change it.
func WithCompletionBudget(n int) Option { return func(o *options) { o.cfg.Budget = n } }

// WithPortSharing lets the server's listeners share their port with other
// sockets that set SO_REUSEPORT, such as another process serving the same
// port during a rolling restart; the kernel then spreads new connections
// over all of them. Default off: Listen fails with "address already in
// use" when something listens on the port already, as Go's net does.
// Windows has no SO_REUSEPORT: there Listen fails with an error wrapping
// errors.ErrUnsupported when it is on.
func WithPortSharing(on bool) Option { return func(o *options) { o.sharePort = on } }

// WithBacklog sets the listen backlog. Default SOMAXCONN.
func WithBacklog(n int) Option { return func(o *options) { o.backlog = n } }

// WithLoopConfig sets the loop settings without an option of their own
// (ring and buffer sizes, CacheBytes, BlockThreshold, Pool). It composes
// with the other options: only the non-zero fields of c are applied, so the
// defaults and what earlier options set stay unless c sets them.
func WithLoopConfig(c Config) Option {
	return func(o *options) {
		dst := reflect.ValueOf(&o.cfg).Elem()
		src := reflect.ValueOf(c)
		for i := range src.NumField() {
			if f := src.Field(i); !f.IsZero() && src.Type().Field(i).IsExported() {
				dst.Field(i).Set(f)
			}
		}
	}
}

// WithTLS serves every connection of the server over TLS with cfg, using
// the standard crypto/tls, so every tls.Config feature applies:
// certificates or GetCertificate (SNI, certificates reloaded without a
// restart), NextProtos (ALPN; the protocol chosen is in Conn.TLS),
// ClientAuth (mTLS), session tickets and resumption, MinVersion.
//
// TLS is a layer of the connection: handlers see plaintext in OnData,
// Next, Peek and Read, and Write, Writev, WriteString and AsyncWrite
// encrypt, so a protocol written for plaintext (package http, websocket,
// a proxy) runs over TLS unchanged. The handshake never makes the loop
// wait for the peer: it runs on the loop between the peer's flights, or on
// a goroutine (WithTLSHandshakeOffLoop), bounded in time
// (WithTLSHandshakeTimeout) and in number (WithMaxTLSHandshakes); the
// handler sees the connection (OnOpen) only once it is done. An established connection holds no goroutine: its
// records are decrypted and encrypted on its loop. Splicing a TLS
// connection fails with ErrCannotSplice (the kernel would move
// ciphertext); ForwardTo works, copying plaintext.
//
// cfg must not be changed after the server starts (clone it first if it
// is shared), as with net/http.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) {
		o.tlsOpts().cfg = cfg
	}
}

// tlsOpts returns the server's TLS settings, made with their defaults by
// whichever TLS option comes first.
func (o *options) tlsOpts() *tlsServer {
	if o.tls == nil {
		o.tls = &tlsServer{timeout: DefaultTLSHandshakeTimeout, max: DefaultMaxTLSHandshakes}
	}
	return o.tls
}

// WithTLSHandshakeTimeout bounds a TLS handshake (default 10s): a peer
// that has not finished it by then is disconnected
// (ErrTLSHandshakeTimeout, Stats.TLSHandshakeTimeouts). It applies with
// WithTLS.
func WithTLSHandshakeTimeout(d time.Duration) Option {
	return func(o *options) {
		if ts := o.tlsOpts(); d > 0 {
			ts.timeout = d
		}
	}
}

// WithTLSHandshakeOffLoop says where TLS handshakes run. Without it, a
// handshake runs on its connection's loop, as a coroutine that hands the
// loop back whenever it waits for the peer and is resumed when the peer's
// next flight arrives: no goroutine waits on the peer, no thread hands
// work to another, and the loop spends at most about half a millisecond
// per iteration on handshakes, so established connections keep their
// latency under a flood of them. That needs the tls.Config's callbacks
// never to block, so a config with one that might (GetCertificate,
// GetConfigForClient, GetClientCertificate, VerifyPeerCertificate,
// VerifyConnection, WrapSession, UnwrapSession,
// GetEncryptedClientHelloKeys, EncryptedClientHelloRejectionVerify) or
// with a KeyLogWriter runs its handshakes on goroutines instead, bounded
// by the spare Ps.
//
// off true always runs handshakes on goroutines: for callbacks that wait
// on a network or a disk (an ACME client behind GetCertificate). off false
// always runs them on the loop: for callbacks known to return at once (a
// GetCertificate that picks from certificates in memory). It applies with
// WithTLS.
func WithTLSHandshakeOffLoop(off bool) Option {
	return func(o *options) {
		ts := o.tlsOpts()
		ts.where = placeOnLoop
		if off {
			ts.where = placeOffLoop
		}
	}
}

// WithMaxTLSHandshakes bounds the TLS handshakes the server runs at once
// (default 4096). A connection that arrives past the bound is closed at
// once (Stats.TLSRefused), before any handshake work: under a flood of
// handshakes, the connections already established keep their loops. It
// applies with WithTLS.
func WithMaxTLSHandshakes(n int) Option {
	return func(o *options) {
		if ts := o.tlsOpts(); n > 0 {
			ts.max = int64(n)
		}
	}
}
