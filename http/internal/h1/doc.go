// Package h1 is the protocol core of HTTP/1.1 (RFC 9112) below package
// http's server: byte classes and scanners for tokens, field values and
// request-targets, the chunked transfer coding's decoder, the trailer and
// field-line scanner, the Date cache and the serializers of status lines,
// chunks and error answers. It works on byte slices, does no I/O and keeps
// no connection state, like http/internal/h2 for HTTP/2's framing.
//
// The request parser and the response writer stay in package http: they
// fill and read the Request and ResponseHeader that handlers see.
//
// Errors are *[Error] values carrying the status to answer with; package
// http hands them to its users as *http.ProtocolError, a type with the same
// fields, by converting the pointer.
package h1
