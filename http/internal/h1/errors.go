package h1

import (
	"errors"
	"strconv"
)

// ErrNeedMore is returned by package http's request parser and by
// [ChunkedDecoder.Next] when the input ends before the current element is
// complete and no protocol error has been detected so far. The caller
// reads more bytes and calls again. It is not a protocol error.
var ErrNeedMore = errors.New("http: need more data")

// An Error reports malformed or unacceptable input: Status is the status
// to answer with before closing the connection, Reason what was wrong.
// Package http's ProtocolError has the same fields, so http hands an
// *Error to its users by converting the pointer: the value keeps its
// address, and no error path allocates.
//
// The errors below are shared values and must not be modified.
type Error struct {
	Status int
	Reason string
}

func (e *Error) Error() string {
	s := "http: " + strconv.Itoa(e.Status) + " " + StatusText(e.Status)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

func badRequest(reason string) *Error {
	return &Error{Status: 400, Reason: reason}
}

// Errors of a field line or of a body's size, found by the chunked decoder
// as by package http's request parser.
var (
	ErrBareCR           = badRequest("CR not followed by LF")
	ErrBareLF           = badRequest("LF without preceding CR")
	ErrBadFieldName     = badRequest("invalid field name")
	ErrSpaceBeforeColon = badRequest("whitespace between field name and colon")
	ErrBadFieldValue    = badRequest("invalid character in field value")
	ErrObsFold          = badRequest("obsolete line folding")
	ErrTooManyHeaders   = &Error{Status: 431, Reason: "too many header fields"}
	ErrBodyTooLarge     = &Error{Status: 413, Reason: "body exceeds limit"}
)

// The chunked decoder's own errors.
var (
	errBadChunkSize      = badRequest("invalid chunk size")
	errChunkSizeOverflow = badRequest("chunk size overflows")
	errBadChunkExt       = badRequest("invalid chunk extension")
	errChunkLineTooLong  = badRequest("chunk-size line too long")
	errMissingChunkCRLF  = badRequest("missing CRLF after chunk data")
	errTrailerTooLarge   = &Error{Status: 431, Reason: "trailer section exceeds limit"}
)
