package websocket

import (
	"encoding/binary"
	"errors"
	"strconv"
	"unicode/utf8"
)

// A StatusCode is a close frame's status code (RFC 6455 §7.4).
type StatusCode uint16

// Status codes from RFC 6455 §7.4.1 and the IANA registry.
const (
	StatusNormalClosure      StatusCode = 1000
	StatusGoingAway          StatusCode = 1001
	StatusProtocolError      StatusCode = 1002
	StatusUnsupportedData    StatusCode = 1003
	StatusNoStatusReceived   StatusCode = 1005 // never sent: a close frame without a code
	StatusAbnormalClosure    StatusCode = 1006 // never sent: the connection dropped without a close frame
	StatusInvalidPayload     StatusCode = 1007 // e.g. a text message that is not UTF-8
	StatusPolicyViolation    StatusCode = 1008
	StatusMessageTooBig      StatusCode = 1009
	StatusMandatoryExtension StatusCode = 1010
	StatusInternalError      StatusCode = 1011
	StatusServiceRestart     StatusCode = 1012
	StatusTryAgainLater      StatusCode = 1013
	StatusBadGateway         StatusCode = 1014
	StatusTLSHandshake       StatusCode = 1015 // never sent
)

// Valid reports whether code may appear in a close frame: 1000–1003,
// 1007–1014, or 3000–4999 (registered and private codes). 1004–1006 and
// 1015 are reserved or meant only for local reporting; everything else
// below 3000 is unassigned and 5000 and above are out of range.
func (code StatusCode) Valid() bool {
	switch {
	case code >= 1000 && code <= 1003:
		return true
	case code >= 1007 && code <= 1014:
		return true
	case code >= 3000 && code <= 4999:
		return true
	}
	return false
}

func (code StatusCode) String() string { return strconv.Itoa(int(code)) }

// MaxCloseReason is the longest close reason that fits a control frame
// beside the 2-byte code.
const MaxCloseReason = MaxControlPayload - 2

// A CloseError reports the close frame the peer sent: its status code
// (StatusNoStatusReceived when the frame had none) and reason.
type CloseError struct {
	Code   StatusCode
	Reason string
}

func (e *CloseError) Error() string {
	if e.Reason == "" {
		return "websocket: closed by peer with status " + e.Code.String()
	}
	return "websocket: closed by peer with status " + e.Code.String() + ": " + e.Reason
}

// A ProtocolError is the peer breaking RFC 6455 (or a limit): the
// connection is failed with a close frame carrying Code — 1002 for a
// protocol violation, 1007 for invalid UTF-8, 1009 for a frame or message
// over the limits — and then closed. errors.Is(err, ErrProtocol) is true
// for every ProtocolError.
type ProtocolError struct {
	Code   StatusCode
	Reason string
}

func (e *ProtocolError) Error() string {
	return "websocket: " + e.Reason + " (close " + e.Code.String() + ")"
}

// Is makes errors.Is(err, ErrProtocol) match every ProtocolError.
func (e *ProtocolError) Is(target error) bool { return target == ErrProtocol }

// Errors reported by the package. Test them with errors.Is.
var (
	// ErrProtocol matches every *ProtocolError.
	ErrProtocol = errors.New("websocket: protocol error")
	// ErrClosed: the connection is closing or closed; nothing more can be sent.
	ErrClosed = errors.New("websocket: connection closed")
	// ErrAbnormalClosure: the TCP connection ended without a close
	// handshake (status 1006). The underlying cause is wrapped with it.
	ErrAbnormalClosure = errors.New("websocket: connection closed without a close frame")
	// ErrPongTimeout: a keep-alive ping went unanswered.
	ErrPongTimeout = errors.New("websocket: no pong within the keep-alive timeout")
	// ErrCloseTimeout: the peer did not answer our close frame in time.
	ErrCloseTimeout = errors.New("websocket: no close frame from the peer within the close timeout")
	// ErrOutputFull: the message was not sent because the connection's
	// pending output is above the limit set with WithMaxPendingOutput (a
	// peer that does not read).
	ErrOutputFull = errors.New("websocket: pending output over the limit")
	// ErrInvalidCloseCode: Close was given a code that may not be sent.
	ErrInvalidCloseCode = errors.New("websocket: invalid close code")
	// ErrReasonTooLong: a close reason longer than MaxCloseReason bytes,
	// or not UTF-8.
	ErrReasonTooLong = errors.New("websocket: close reason too long or not UTF-8")
	// ErrControlTooLong: a ping or pong payload above 125 bytes.
	ErrControlTooLong = errors.New("websocket: control frame payload above 125 bytes")
	// ErrBadHandshake: the request is not a valid WebSocket opening
	// handshake; the wrapped message says why.
	ErrBadHandshake = errors.New("websocket: bad handshake")
	// ErrOriginRejected: the Origin check refused the request (403).
	ErrOriginRejected = errors.New("websocket: origin rejected")
)

// The protocol errors the decoder reports. Each is a value, so reporting
// one allocates nothing.
var (
	errNonMinimalLength   = &ProtocolError{StatusProtocolError, "payload length not minimally encoded"}
	errLengthMSB          = &ProtocolError{StatusProtocolError, "payload length with the most significant bit set"}
	errUnmasked           = &ProtocolError{StatusProtocolError, "unmasked frame from a client"}
	errMaskedFromServer   = &ProtocolError{StatusProtocolError, "masked frame from a server"}
	errReservedBits       = &ProtocolError{StatusProtocolError, "reserved bits set without an extension"}
	errReservedOpcode     = &ProtocolError{StatusProtocolError, "reserved opcode"}
	errControlFragmented  = &ProtocolError{StatusProtocolError, "fragmented control frame"}
	errControlTooLong     = &ProtocolError{StatusProtocolError, "control frame payload above 125 bytes"}
	errUnexpectedContinue = &ProtocolError{StatusProtocolError, "continuation frame without a message to continue"}
	errExpectedContinue   = &ProtocolError{StatusProtocolError, "new data frame inside a fragmented message"}
	errCloseLen1          = &ProtocolError{StatusProtocolError, "close frame with a 1-byte payload"}
	errCloseCode          = &ProtocolError{StatusProtocolError, "invalid close code"}
	errCloseReasonUTF8    = &ProtocolError{StatusInvalidPayload, "close reason is not UTF-8"}
	errTextUTF8           = &ProtocolError{StatusInvalidPayload, "text message is not UTF-8"}
	errFrameTooBig        = &ProtocolError{StatusMessageTooBig, "frame above the size limit"}
	errMessageTooBig      = &ProtocolError{StatusMessageTooBig, "message above the size limit"}
	errBadCompressed      = &ProtocolError{StatusInvalidPayload, "compressed message does not inflate"}
)

// ParseClosePayload splits a close frame's payload into code and reason,
// checking both: an empty payload is StatusNoStatusReceived with no
// reason; one byte, or a code that may not be sent, is a 1002 protocol
// error; a reason that is not UTF-8 is a 1007 one. The reason is a view
// of payload.
func ParseClosePayload(payload []byte) (StatusCode, []byte, error) {
	switch len(payload) {
	case 0:
		return StatusNoStatusReceived, nil, nil
	case 1:
		return 0, nil, errCloseLen1
	}
	code := StatusCode(binary.BigEndian.Uint16(payload))
	if !code.Valid() {
		return code, nil, errCloseCode
	}
	reason := payload[2:]
	if !utf8.Valid(reason) {
		return code, nil, errCloseReasonUTF8
	}
	return code, reason, nil
}

// AppendClosePayload appends a close frame's payload: code and reason.
// StatusNoStatusReceived appends nothing (a close frame without a code).
func AppendClosePayload(dst []byte, code StatusCode, reason string) []byte {
	if code == StatusNoStatusReceived {
		return dst
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(code))
	return append(dst, reason...)
}
