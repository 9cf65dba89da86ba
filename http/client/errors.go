package client

import (
	"errors"
	"fmt"
)

// Errors a call can end with, matched with errors.Is through the *Error
// that OnResponseEnd and Do return.
var (
	// ErrUpstreamClosed: the upstream closed or reset the connection
	// before the response was complete.
	ErrUpstreamClosed = errors.New("client: upstream closed the connection")
	// ErrTimeout: no response head arrived within the response-header
	// timeout (WithResponseHeaderTimeout).
	ErrTimeout = errors.New("client: timeout awaiting the response head")
	// ErrDial: the connection to the upstream could not be made (the
	// cause, such as connection refused, is wrapped too).
	ErrDial = errors.New("client: dial failed")
	// ErrQueueFull: every connection to the upstream on this loop was busy
	// (WithMaxConnsPerHost) and its wait queue was full
	// (WithMaxQueuedPerHost).
	ErrQueueFull = errors.New("client: too many requests waiting for a connection to the upstream")
	// ErrCanceled: the caller cancelled the call (Call.Cancel, or the
	// context of Do).
	ErrCanceled = errors.New("client: call cancelled")
	// ErrClientClosed: the Client was closed.
	ErrClientClosed = errors.New("client: closed")
	// ErrInvalidRequest: the Request cannot be sent as given (a field or
	// target with CR, LF or NUL, a method that is not a token, no Addr).
	ErrInvalidRequest = errors.New("client: invalid request")
	// ErrNotHijackable: Hijack outside OnResponseHead of a 101 response.
	ErrNotHijackable = errors.New("client: only a 101 response's connection can be taken over")
)

// A ProtocolError reports a response that breaks HTTP/1.1's rules (RFC
// 9112), such as an ambiguous framing or a malformed head. The connection
// it came on is closed, never reused.
type ProtocolError struct {
	Reason string
}

func (e *ProtocolError) Error() string { return "client: malformed response: " + e.Reason }

func protoErr(reason string) error { return &ProtocolError{Reason: reason} }

// An Error is how a call fails: Err is the cause (ErrUpstreamClosed,
// ErrTimeout, *ProtocolError, ErrDial, ...), Addr the upstream, and
// ResponseStarted says whether any byte of the response had arrived, so a
// proxy knows whether the client already saw part of an answer.
type Error struct {
	Addr            string
	ResponseStarted bool
	Err             error
}

func (e *Error) Error() string {
	started := ""
	if e.ResponseStarted {
		started = " (after part of the response)"
	}
	return fmt.Sprintf("client: %s%s: %v", e.Addr, started, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }
