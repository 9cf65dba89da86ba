package websocket

import (
	"encoding/binary"
	"errors"
	"math/bits"
)

// An Opcode is a frame's opcode (RFC 6455 §5.2).
type Opcode uint8

// The opcodes RFC 6455 defines. 0x3–0x7 and 0xB–0xF are reserved.
const (
	OpContinuation Opcode = 0x0
	OpText         Opcode = 0x1
	OpBinary       Opcode = 0x2
	OpClose        Opcode = 0x8
	OpPing         Opcode = 0x9
	OpPong         Opcode = 0xA
)

// IsControl reports whether o is a control opcode (close, ping, pong or a
// reserved control opcode): the most significant opcode bit is set.
func (o Opcode) IsControl() bool { return o&0x8 != 0 }

// IsReserved reports whether o is one of the opcodes RFC 6455 reserves
// for future use.
func (o Opcode) IsReserved() bool {
	switch o {
	case OpContinuation, OpText, OpBinary, OpClose, OpPing, OpPong:
		return false
	}
	return true
}

func (o Opcode) String() string {
	switch o {
	case OpContinuation:
		return "continuation"
	case OpText:
		return "text"
	case OpBinary:
		return "binary"
	case OpClose:
		return "close"
	case OpPing:
		return "ping"
	case OpPong:
		return "pong"
	}
	return "reserved"
}

// The reserved bits of a frame's first byte, as Header.Rsv holds them.
const (
	Rsv1 uint8 = 0x4 // permessage-deflate's "compressed" bit (RFC 7692)
	Rsv2 uint8 = 0x2
	Rsv3 uint8 = 0x1
)

// MaxHeaderLen is the longest frame header: 2 bytes, an 8-byte extended
// length and a 4-byte masking key.
const MaxHeaderLen = 14

// MaxControlPayload is the longest payload of a control frame (§5.5).
const MaxControlPayload = 125

// ErrNeedMore is returned by [ParseHeader] and [Decoder.Next] when the
// input ends before what they need: call again with more input.
var ErrNeedMore = errors.New("websocket: need more input")

// A Header is a frame header (RFC 6455 §5.2).
type Header struct {
	Fin    bool
	Rsv    uint8 // RSV1..RSV3 as Rsv1|Rsv2|Rsv3
	Opcode Opcode
	Masked bool
	Mask   [4]byte // the masking key, when Masked
	Length int64   // payload length
}

// Len returns the encoded length of h.
func (h *Header) Len() int {
	n := 2
	switch {
	case h.Length > 0xFFFF:
		n += 8
	case h.Length > 125:
		n += 2
	}
	if h.Masked {
		n += 4
	}
	return n
}

// ParseHeader parses the frame header at the start of b and returns it with
// its encoded length. It returns ErrNeedMore when b holds only part of the
// header, and a *[ProtocolError] (close code 1002) for a length that is
// not in its minimal encoding or has the most significant bit set. It
// checks nothing else: opcodes, reserved bits and masking are the
// [Decoder]'s business. It never allocates.
func ParseHeader(b []byte) (Header, int, error) {
	var h Header
	if len(b) < 2 {
		return h, 0, ErrNeedMore
	}
	b0, b1 := b[0], b[1]
	h.Fin = b0&0x80 != 0
	h.Rsv = (b0 >> 4) & 0x7
	h.Opcode = Opcode(b0 & 0xF)
	h.Masked = b1&0x80 != 0
	n := 2
	switch l := b1 & 0x7F; l {
	case 126:
		if len(b) < 4 {
			return h, 0, ErrNeedMore
		}
		h.Length = int64(binary.BigEndian.Uint16(b[2:4]))
		if h.Length < 126 {
			return h, 0, errNonMinimalLength
		}
		n = 4
	case 127:
		if len(b) < 10 {
			return h, 0, ErrNeedMore
		}
		u := binary.BigEndian.Uint64(b[2:10])
		if u>>63 != 0 {
			return h, 0, errLengthMSB
		}
		if u <= 0xFFFF {
			return h, 0, errNonMinimalLength
		}
		h.Length = int64(u)
		n = 10
	default:
		h.Length = int64(l)
	}
	if h.Masked {
		if len(b) < n+4 {
			return h, 0, ErrNeedMore
		}
		copy(h.Mask[:], b[n:n+4])
		n += 4
	}
	return h, n, nil
}

// PutHeader encodes h into dst, which must hold h.Len() bytes
// (MaxHeaderLen always suffices), and returns the number of bytes written.
// h.Length must not be negative.
func PutHeader(dst []byte, h *Header) int {
	b0 := byte(h.Opcode&0xF) | (h.Rsv&0x7)<<4
	if h.Fin {
		b0 |= 0x80
	}
	var m byte
	if h.Masked {
		m = 0x80
	}
	n := 2
	switch l := h.Length; {
	case l > 0xFFFF:
		_ = dst[9]
		dst[1] = m | 127
		binary.BigEndian.PutUint64(dst[2:10], uint64(l))
		n = 10
	case l > 125:
		_ = dst[3]
		dst[1] = m | 126
		binary.BigEndian.PutUint16(dst[2:4], uint16(l))
		n = 4
	default:
		_ = dst[1]
		dst[1] = m | byte(l)
	}
	dst[0] = b0
	if h.Masked {
		copy(dst[n:n+4], h.Mask[:])
		n += 4
	}
	return n
}

// AppendHeader appends the encoding of h to dst.
func AppendHeader(dst []byte, h *Header) []byte {
	var buf [MaxHeaderLen]byte
	n := PutHeader(buf[:], h)
	return append(dst, buf[:n]...)
}

// MaskBytes XORs b in place with the masking key, starting at position
// pos of the key's 4-byte cycle, and returns the position after b. Masking
// and unmasking are the same operation (§5.3): a payload split into
// chunks is unmasked chunk by chunk by passing each call's result to the
// next.
//
// The bulk is done eight bytes at a time through encoding/binary's
// little-endian loads and stores, which the compiler turns into plain
// 64-bit moves: no unsafe is needed.
func MaskBytes(key [4]byte, pos int, b []byte) int {
	pos &= 3
	if len(b) >= 16 {
		// The key as a 64-bit word, rotated so that its first byte is the
		// one for b[0]. In little-endian order byte i of the word is the
		// key byte for b[i].
		k32 := binary.LittleEndian.Uint32(key[:])
		k32 = bits.RotateLeft32(k32, -8*pos)
		k64 := uint64(k32) | uint64(k32)<<32
		for len(b) >= 8 {
			v := binary.LittleEndian.Uint64(b)
			binary.LittleEndian.PutUint64(b, v^k64)
			b = b[8:]
		}
		// Eight bytes are two whole key cycles: pos is unchanged.
	}
	for i := range b {
		b[i] ^= key[pos]
		pos = (pos + 1) & 3
	}
	return pos
}
