package h2

import (
	"errors"
	"fmt"
)

// An ErrCode is an HTTP/2 error code (RFC 9113 §7), sent in RST_STREAM
// and GOAWAY frames.
type ErrCode uint32

// The error codes of RFC 9113 §7.
const (
	NoError            ErrCode = 0x0
	ProtocolError      ErrCode = 0x1
	InternalError      ErrCode = 0x2
	FlowControlError   ErrCode = 0x3
	SettingsTimeout    ErrCode = 0x4
	StreamClosed       ErrCode = 0x5
	FrameSizeError     ErrCode = 0x6
	RefusedStream      ErrCode = 0x7
	Cancel             ErrCode = 0x8
	CompressionError   ErrCode = 0x9
	ConnectError       ErrCode = 0xa
	EnhanceYourCalm    ErrCode = 0xb
	InadequateSecurity ErrCode = 0xc
	HTTP11Required     ErrCode = 0xd
)

var errCodeNames = [...]string{
	"NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR",
	"SETTINGS_TIMEOUT", "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM",
	"CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM",
	"INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
}

// String returns the code's name in the RFC, or its number for a code
// the RFC does not define (which a peer may send; RFC 9113 §7 says to
// treat it as INTERNAL_ERROR, and not to fail on it).
func (c ErrCode) String() string {
	if int(c) < len(errCodeNames) {
		return errCodeNames[c]
	}
	return fmt.Sprintf("unknown error code 0x%x", uint32(c))
}

// An Error is a frame or a sequence of frames that breaks the protocol.
// Stream 0 makes it a connection error (RFC 9113 §5.4.1: GOAWAY with
// Code, then close); any other stream a stream error (§5.4.2:
// RST_STREAM with Code on that stream, the connection goes on).
type Error struct {
	Code   ErrCode
	Stream uint32
	Reason string
}

// ErrProtocol is the sentinel every *Error matches with errors.Is.
var ErrProtocol = errors.New("h2: protocol error")

func (e *Error) Error() string {
	if e.Stream == 0 {
		return fmt.Sprintf("h2: connection error %v: %s", e.Code, e.Reason)
	}
	return fmt.Sprintf("h2: stream %d error %v: %s", e.Stream, e.Code, e.Reason)
}

// Is makes errors.Is(err, ErrProtocol) true for every *Error.
func (e *Error) Is(target error) bool { return target == ErrProtocol }

// ConnError returns a connection error.
func ConnError(code ErrCode, reason string) *Error {
	return &Error{Code: code, Reason: reason}
}

// StreamError returns an error of stream id alone.
func StreamError(id uint32, code ErrCode, reason string) *Error {
	return &Error{Code: code, Stream: id, Reason: reason}
}
