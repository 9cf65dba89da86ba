// Package h2 is HTTP/2's framing layer (RFC 9113 §4 and §6): frames read
// from and appended to byte slices, each frame type's rules checked with
// the error code the RFC names, SETTINGS values and flow-control windows.
// It does no I/O and keeps no connection state; the server in package
// http drives it from the loop's input, and HPACK lives apart
// (golang.org/x/net/http2/hpack), as in x/net/http2's split of framer,
// HPACK, flow control and server.
//
// Frames are read with [Next] from the bytes received so far: it returns
// the frame's header and payload as views into the input, or that more
// bytes are needed. A frame that breaks a rule gives an [*Error] saying
// whether the connection (GOAWAY) or only the stream (RST_STREAM) ends,
// and with which code.
package h2
