// Package reactor is a deprecated compatibility layer: veloq's engine and
// its whole public TCP surface moved into package net
// (github.com/veloq/veloq/net), so that one package holds every type,
// option, error and stat a TCP user needs and go doc shows each method
// where the user looks.
//
// Every name here is an alias of the net name of the same spelling, so
// code written against reactor keeps compiling and interoperates with code
// written against net (a *reactor.Conn is a *net.Conn).
//
// Deprecated: import github.com/veloq/veloq/net instead.
package reactor

import vnet "github.com/veloq/veloq/net"

// Types, all aliases of package net's.
type (
	// Deprecated: use net.Conn.
	Conn = vnet.Conn
	// Deprecated: use net.Handler.
	Handler = vnet.Handler
	// Deprecated: use net.EOFHandler.
	EOFHandler = vnet.EOFHandler
	// Deprecated: use net.HandlerFuncs.
	HandlerFuncs = vnet.HandlerFuncs
	// Deprecated: use net.Loop.
	Loop = vnet.Loop
	// Deprecated: use net.Listener.
	Listener = vnet.Listener
	// Deprecated: use net.Backend.
	Backend = vnet.Backend
	// Deprecated: use net.Config.
	Config = vnet.Config
	// Deprecated: use net.Stats.
	Stats = vnet.Stats
	// Deprecated: use net.Timer.
	Timer = vnet.Timer
)

// The backends.
const (
	// Deprecated: use net.BackendAuto.
	BackendAuto = vnet.BackendAuto
	// Deprecated: use net.BackendUring.
	BackendUring = vnet.BackendUring
	// Deprecated: use net.BackendEpoll.
	BackendEpoll = vnet.BackendEpoll
)

// Errors: the same values as package net's, so errors.Is matches either.
var (
	// Deprecated: use net.ErrClosed.
	ErrClosed = vnet.ErrClosed
	// Deprecated: use net.ErrInputTooLarge.
	ErrInputTooLarge = vnet.ErrInputTooLarge
	// Deprecated: use net.ErrIdleTimeout.
	ErrIdleTimeout = vnet.ErrIdleTimeout
	// Deprecated: use net.ErrCloseTimeout.
	ErrCloseTimeout = vnet.ErrCloseTimeout
	// Deprecated: use net.ErrDialTimeout.
	ErrDialTimeout = vnet.ErrDialTimeout
	// Deprecated: use net.ErrHandlerPanic.
	ErrHandlerPanic = vnet.ErrHandlerPanic
	// Deprecated: use net.ErrCannotSplice.
	ErrCannotSplice = vnet.ErrCannotSplice
	// Deprecated: use net.ErrSpliceBroken.
	ErrSpliceBroken = vnet.ErrSpliceBroken
)

// NewLoop starts a loop.
//
// Deprecated: use net.NewLoop.
func NewLoop(id int, cfg Config) (*Loop, error) { return vnet.NewLoop(id, cfg) }

// ParseBackend checks a backend name.
//
// Deprecated: use net.ParseBackend.
func ParseBackend(s string) (Backend, error) { return vnet.ParseBackend(s) }

// ProbeUring reports whether io_uring can run here.
//
// Deprecated: use net.ProbeUring or net.BackendUring.Available.
func ProbeUring() error { return vnet.ProbeUring() }
