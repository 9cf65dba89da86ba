package http

import (
	"errors"
	"strconv"
)

// ErrNeedMore is returned by [Parser.Parse] and [ChunkedDecoder.Next] when
// the input ends before the current element is complete and no protocol
// error has been detected so far. The caller reads more bytes and calls
// again. It is not a protocol error.
var ErrNeedMore = errors.New("http: need more data")

// A ProtocolError reports malformed or unacceptable input. Status is the
// response status code the server should send before closing the
// connection; Reason says what was wrong.
//
// Every ProtocolError is fatal for the connection: the request framing can
// no longer be trusted, so the server answers with Status (see
// [AppendError]) and closes.
//
// Errors returned by this package are shared values and must not be
// modified.
type ProtocolError struct {
	Status int
	Reason string
}

func (e *ProtocolError) Error() string {
	s := "http: " + strconv.Itoa(e.Status) + " " + StatusText(e.Status)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

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

// ErrNotHTTPVersion is the [Parser]'s error for a request line whose third
// part is not an HTTP-version at all: it does not start with "HTTP/",
// a digit, "." and a digit (RFC 9112 §2.3). It is a 400 error like any
// malformed request (errors.Is(err, ErrBadRequest) holds), but the server
// does not answer a connection's first line with it when HTTP/2 is on and
// the line is no HTTP/1 request line at all: see [WithHTTP2].
var ErrNotHTTPVersion = badRequest("not an HTTP-version")

// ErrorStatus returns the status code a server should answer err with: the
// Status of a *ProtocolError, 0 for nil and ErrNeedMore, and 500 otherwise.
func ErrorStatus(err error) int {
	if err == nil || err == ErrNeedMore {
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

func badRequest(reason string) *ProtocolError {
	return &ProtocolError{Status: StatusBadRequest, Reason: reason}
}

// The specific errors. They are allocated once here so that returning them
// costs nothing.
var (
	errBareCR            = badRequest("CR not followed by LF")
	errBareLF            = badRequest("LF without preceding CR")
	errBadMethod         = badRequest("invalid method")
	errBadTarget         = badRequest("invalid request-target")
	errBadVersion        = badRequest("malformed HTTP-version")
	errBadFieldName      = badRequest("invalid field name")
	errSpaceBeforeColon  = badRequest("whitespace between field name and colon")
	errBadFieldValue     = badRequest("invalid character in field value")
	errObsFold           = badRequest("obsolete line folding")
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
	errBadChunkSize      = badRequest("invalid chunk size")
	errChunkSizeOverflow = badRequest("chunk size overflows")
	errBadChunkExt       = badRequest("invalid chunk extension")
	errChunkLineTooLong  = badRequest("chunk-size line too long")
	errMissingChunkCRLF  = badRequest("missing CRLF after chunk data")

	errVersion         = &ProtocolError{Status: StatusHTTPVersionNotSupported, Reason: "only HTTP/1.x is supported"}
	errTargetTooLong   = &ProtocolError{Status: StatusRequestURITooLong, Reason: "request-target exceeds limit"}
	errHeadTooLarge    = &ProtocolError{Status: StatusRequestHeaderFieldsTooLarge, Reason: "header section exceeds limit"}
	errTooManyHeaders  = &ProtocolError{Status: StatusRequestHeaderFieldsTooLarge, Reason: "too many header fields"}
	errTrailerTooLarge = &ProtocolError{Status: StatusRequestHeaderFieldsTooLarge, Reason: "trailer section exceeds limit"}
	errBodyTooLarge    = &ProtocolError{Status: StatusRequestEntityTooLarge, Reason: "body exceeds limit"}
	errTEUnsupported   = &ProtocolError{Status: StatusNotImplemented, Reason: "unsupported transfer coding"}
	errExpectation     = &ProtocolError{Status: StatusExpectationFailed, Reason: "unsupported expectation"}
)
