package http

import (
	"errors"

	"github.com/veloq/veloq/http/internal/h1"
)

// A ProtocolError reports malformed or unacceptable input. Status is the
// response status code the server should send before closing the
// connection; Reason says what was wrong.
//
// Every ProtocolError is fatal for the connection: the request framing can
// no longer be trusted, so the server answers with Status and closes.
//
// Errors returned by this package are shared values and must not be
// modified.
type ProtocolError struct {
	Status int
	Reason string
}

func (e *ProtocolError) Error() string { return (*h1.Error)(e).Error() }

// Is makes every ProtocolError match the sentinel with the same status, so
// errors.Is(err, ErrBadRequest) holds for any 400 error.
func (e *ProtocolError) Is(target error) bool {
	t, ok := target.(*ProtocolError)
	return ok && t.Reason == "" && t.Status == e.Status
}

// Sentinel errors, one per status class, for use with errors.Is.
var (
	ErrBadRequest          = &ProtocolError{Status: StatusBadRequest}
	ErrBodyTooLarge        = &ProtocolError{Status: StatusRequestEntityTooLarge}
	ErrURITooLong          = &ProtocolError{Status: StatusRequestURITooLong}
	ErrExpectationFailed   = &ProtocolError{Status: StatusExpectationFailed}
	ErrHeaderTooLarge      = &ProtocolError{Status: StatusRequestHeaderFieldsTooLarge}
	ErrNotImplemented      = &ProtocolError{Status: StatusNotImplemented}
	ErrVersionNotSupported = &ProtocolError{Status: StatusHTTPVersionNotSupported}
)

// errNotHTTPVersion is the parser's error for a request line whose third
// part is not an HTTP-version at all: it does not start with "HTTP/",
// a digit, "." and a digit (RFC 9112 §2.3). It is a 400 error like any
// malformed request (errors.Is(err, ErrBadRequest) holds), but the server
// does not answer a connection's first line with it when HTTP/2 is on and
// the line is no HTTP/1 request line at all: see [WithHTTP2].
var errNotHTTPVersion = badRequest("not an HTTP-version")

// ErrorStatus returns the status code a server should answer err with: the
// Status of a *ProtocolError, 0 for nil, and 500 otherwise.
func ErrorStatus(err error) int {
	if err == nil || err == h1.ErrNeedMore {
		return 0
	}
	if pe, ok := err.(*ProtocolError); ok {
		return pe.Status
	}
	var pe *ProtocolError
	if errors.As(err, &pe) {
		return pe.Status
	}
	return StatusInternalServerError
}

// coreError returns err, from the protocol core (package h1), as this
// package's error: an *h1.Error becomes the *ProtocolError at the same
// address (the two types have the same fields), so that errors.Is with
// the sentinels and ErrorStatus work on it.
func coreError(err error) error {
	if e, ok := err.(*h1.Error); ok {
		return (*ProtocolError)(e)
	}
	return err
}

func badRequest(reason string) *ProtocolError {
	return &ProtocolError{Status: StatusBadRequest, Reason: reason}
}

// The specific errors. They are allocated once here so that returning them
// costs nothing. Those the chunked decoder finds too are the protocol
// core's values, converted.
var (
	errBareCR            = (*ProtocolError)(h1.ErrBareCR)
	errBareLF            = (*ProtocolError)(h1.ErrBareLF)
	errBadMethod         = badRequest("invalid method")
	errBadTarget         = badRequest("invalid request-target")
	errBadVersion        = badRequest("malformed HTTP-version")
	errBadFieldName      = (*ProtocolError)(h1.ErrBadFieldName)
	errSpaceBeforeColon  = (*ProtocolError)(h1.ErrSpaceBeforeColon)
	errBadFieldValue     = (*ProtocolError)(h1.ErrBadFieldValue)
	errObsFold           = (*ProtocolError)(h1.ErrObsFold)
	errMissingHost       = badRequest("missing Host header")
	errMultipleHost      = badRequest("multiple Host headers")
	errBadHost           = badRequest("invalid Host header")
	errBadContentLength  = badRequest("invalid Content-Length")
	errDiffContentLength = badRequest("conflicting Content-Length values")
	errCLAndTE           = badRequest("both Content-Length and Transfer-Encoding")
	errTENotChunked      = badRequest("chunked is not the final transfer coding")
	errTEChunkedTwice    = badRequest("chunked applied more than once")
	errBadTransferCoding = badRequest("invalid transfer coding")
	errTEHTTP10          = badRequest("Transfer-Encoding in an HTTP/1.0 request")

	errVersion        = &ProtocolError{Status: StatusHTTPVersionNotSupported, Reason: "only HTTP/1.x is supported"}
	errTargetTooLong  = &ProtocolError{Status: StatusRequestURITooLong, Reason: "request-target exceeds limit"}
	errHeadTooLarge   = &ProtocolError{Status: StatusRequestHeaderFieldsTooLarge, Reason: "header section exceeds limit"}
	errTooManyHeaders = (*ProtocolError)(h1.ErrTooManyHeaders)
	errBodyTooLarge   = (*ProtocolError)(h1.ErrBodyTooLarge)
	errTEUnsupported  = &ProtocolError{Status: StatusNotImplemented, Reason: "unsupported transfer coding"}
	errExpectation    = &ProtocolError{Status: StatusExpectationFailed, Reason: "unsupported expectation"}
)
