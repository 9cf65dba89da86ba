package h2

import "encoding/binary"

// ClientPreface is what a client sends before its first frame (RFC 9113
// §3.4); a server recognises HTTP/2 with prior knowledge by it.
const ClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// HeaderLen is the length of a frame header.
const HeaderLen = 9

// A Type is a frame type (RFC 9113 §6).
type Type uint8

// The frame types of RFC 9113 §6. Frames of other types are ignored
// (§4.1), except in the middle of a header block (§6.10).
const (
	TypeData         Type = 0x0
	TypeHeaders      Type = 0x1
	TypePriority     Type = 0x2
	TypeRSTStream    Type = 0x3
	TypeSettings     Type = 0x4
	TypePushPromise  Type = 0x5
	TypePing         Type = 0x6
	TypeGoAway       Type = 0x7
	TypeWindowUpdate Type = 0x8
	TypeContinuation Type = 0x9
)

var typeNames = [...]string{
	"DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS",
	"PUSH_PROMISE", "PING", "GOAWAY", "WINDOW_UPDATE", "CONTINUATION",
}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "UNKNOWN"
}

// Flags are a frame's flags; which bits mean what depends on its type.
type Flags uint8

// Frame flags (RFC 9113 §6).
const (
	FlagEndStream  Flags = 0x1  // DATA, HEADERS
	FlagAck        Flags = 0x1  // SETTINGS, PING
	FlagEndHeaders Flags = 0x4  // HEADERS, PUSH_PROMISE, CONTINUATION
	FlagPadded     Flags = 0x8  // DATA, HEADERS, PUSH_PROMISE
	FlagPriority   Flags = 0x20 // HEADERS
)

// Has reports whether all of f's bits are set.
func (f Flags) Has(bits Flags) bool { return f&bits == bits }

// A Header is a frame header (RFC 9113 §4.1). The reserved bit of the
// stream identifier is dropped when it is read and never written.
type Header struct {
	Length uint32 // of the payload, 24 bits
	Type   Type
	Flags  Flags
	Stream uint32 // 31 bits
}

// Frame sizes (RFC 9113 §4.2, §6.5.2).
const (
	MinMaxFrameSize = 1 << 14   // SETTINGS_MAX_FRAME_SIZE's initial value and floor
	MaxMaxFrameSize = 1<<24 - 1 // its ceiling
)

// ParseHeader reads the frame header at the start of b, which holds at
// least HeaderLen bytes.
func ParseHeader(b []byte) Header {
	_ = b[HeaderLen-1]
	return Header{
		Length: uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]),
		Type:   Type(b[3]),
		Flags:  Flags(b[4]),
		Stream: binary.BigEndian.Uint32(b[5:]) & (1<<31 - 1),
	}
}

// AppendHeader appends h's frame header to dst.
func AppendHeader(dst []byte, h Header) []byte {
	return append(dst, byte(h.Length>>16), byte(h.Length>>8), byte(h.Length),
		byte(h.Type), byte(h.Flags),
		byte(h.Stream>>24)&0x7f, byte(h.Stream>>16), byte(h.Stream>>8), byte(h.Stream))
}

// Next reads the frame at the start of in: its header, its payload (a view
// into in) and n, the bytes it takes. n == 0 means the frame is not
// complete yet. A frame longer than maxSize (the SETTINGS_MAX_FRAME_SIZE
// this endpoint announced) is a connection error FRAME_SIZE_ERROR
// (RFC 9113 §4.2), reported as soon as its header has arrived, so a peer
// cannot make the reader wait for (and buffer) a huge payload.
func Next(in []byte, maxSize uint32) (h Header, payload []byte, n int, err error) {
	if len(in) < HeaderLen {
		return Header{}, nil, 0, nil
	}
	h = ParseHeader(in)
	if h.Length > maxSize {
		return h, nil, 0, ConnError(FrameSizeError, "frame of "+itoa(h.Length)+" bytes over SETTINGS_MAX_FRAME_SIZE")
	}
	end := HeaderLen + int(h.Length)
	if len(in) < end {
		return h, nil, 0, nil
	}
	return h, in[HeaderLen:end:end], end, nil
}

func itoa(n uint32) string {
	var b [10]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// unpad removes the padding of a DATA, HEADERS or PUSH_PROMISE payload
// with FlagPadded (RFC 9113 §6.1): a pad length at least as long as the
// rest is a connection error PROTOCOL_ERROR.
func unpad(h Header, p []byte) ([]byte, error) {
	if !h.Flags.Has(FlagPadded) {
		return p, nil
	}
	if len(p) == 0 {
		return nil, ConnError(FrameSizeError, h.Type.String()+" with PADDED and no pad length")
	}
	pad := int(p[0])
	p = p[1:]
	if pad > len(p) { // the pad length counts in the payload: pad == len(p)+1 is too long
		return nil, ConnError(ProtocolError, h.Type.String()+" padding longer than its payload")
	}
	return p[:len(p)-pad], nil
}

// ParseData returns a DATA frame's data, without padding (RFC 9113 §6.1).
// The whole payload, padding included, counts against flow control.
func ParseData(h Header, p []byte) ([]byte, error) {
	if h.Stream == 0 {
		return nil, ConnError(ProtocolError, "DATA on stream 0")
	}
	return unpad(h, p)
}

// A Priority is the priority part of a HEADERS or PRIORITY frame. RFC
// 9113 deprecates the scheme; a server checks it and ignores it.
type Priority struct {
	Dependency uint32
	Exclusive  bool
	Weight     uint8
}

func parsePriority(b []byte) Priority {
	d := binary.BigEndian.Uint32(b)
	return Priority{Dependency: d & (1<<31 - 1), Exclusive: d>>31 == 1, Weight: b[4]}
}

// ParseHeaders returns a HEADERS frame's header block fragment, without
// padding and priority (RFC 9113 §6.2). A stream that depends on itself
// is a stream error PROTOCOL_ERROR (§5.3.1).
func ParseHeaders(h Header, p []byte) (block []byte, err error) {
	if h.Stream == 0 {
		return nil, ConnError(ProtocolError, "HEADERS on stream 0")
	}
	if p, err = unpad(h, p); err != nil {
		return nil, err
	}
	if h.Flags.Has(FlagPriority) {
		if len(p) < 5 {
			return nil, ConnError(FrameSizeError, "HEADERS too short for its priority")
		}
		if parsePriority(p).Dependency == h.Stream {
			return nil, StreamError(h.Stream, ProtocolError, "stream depends on itself")
		}
		p = p[5:]
	}
	return p, nil
}

// ParsePriority checks a PRIORITY frame (RFC 9113 §6.3).
func ParsePriority(h Header, p []byte) (Priority, error) {
	if h.Stream == 0 {
		return Priority{}, ConnError(ProtocolError, "PRIORITY on stream 0")
	}
	if len(p) != 5 {
		return Priority{}, StreamError(h.Stream, FrameSizeError, "PRIORITY of length "+itoa(uint32(len(p))))
	}
	pr := parsePriority(p)
	if pr.Dependency == h.Stream {
		return pr, StreamError(h.Stream, ProtocolError, "stream depends on itself")
	}
	return pr, nil
}

// ParseRSTStream returns a RST_STREAM frame's error code (RFC 9113 §6.4).
func ParseRSTStream(h Header, p []byte) (ErrCode, error) {
	if h.Stream == 0 {
		return 0, ConnError(ProtocolError, "RST_STREAM on stream 0")
	}
	if len(p) != 4 {
		return 0, ConnError(FrameSizeError, "RST_STREAM of length "+itoa(uint32(len(p))))
	}
	return ErrCode(binary.BigEndian.Uint32(p)), nil
}

// ParsePing returns a PING frame's opaque data (RFC 9113 §6.7).
func ParsePing(h Header, p []byte) (data [8]byte, err error) {
	if h.Stream != 0 {
		return data, ConnError(ProtocolError, "PING on a stream")
	}
	if len(p) != 8 {
		return data, ConnError(FrameSizeError, "PING of length "+itoa(uint32(len(p))))
	}
	copy(data[:], p)
	return data, nil
}

// ParseGoAway returns a GOAWAY frame's last stream, error code and debug
// data (RFC 9113 §6.8).
func ParseGoAway(h Header, p []byte) (last uint32, code ErrCode, debug []byte, err error) {
	if h.Stream != 0 {
		return 0, 0, nil, ConnError(ProtocolError, "GOAWAY on a stream")
	}
	if len(p) < 8 {
		return 0, 0, nil, ConnError(FrameSizeError, "GOAWAY of length "+itoa(uint32(len(p))))
	}
	return binary.BigEndian.Uint32(p) & (1<<31 - 1), ErrCode(binary.BigEndian.Uint32(p[4:])), p[8:], nil
}

// ParseWindowUpdate returns a WINDOW_UPDATE frame's increment (RFC 9113
// §6.9). An increment of 0 is a PROTOCOL_ERROR of the stream, or of the
// connection for stream 0.
func ParseWindowUpdate(h Header, p []byte) (uint32, error) {
	if len(p) != 4 {
		return 0, ConnError(FrameSizeError, "WINDOW_UPDATE of length "+itoa(uint32(len(p))))
	}
	inc := binary.BigEndian.Uint32(p) & (1<<31 - 1)
	if inc == 0 {
		if h.Stream == 0 {
			return 0, ConnError(ProtocolError, "WINDOW_UPDATE of 0 on the connection")
		}
		return 0, StreamError(h.Stream, ProtocolError, "WINDOW_UPDATE of 0")
	}
	return inc, nil
}

// ParseContinuation checks a CONTINUATION frame (RFC 9113 §6.10) and
// returns its header block fragment.
func ParseContinuation(h Header, p []byte) ([]byte, error) {
	if h.Stream == 0 {
		return nil, ConnError(ProtocolError, "CONTINUATION on stream 0")
	}
	return p, nil
}

// AppendData appends a DATA frame carrying data on stream id.
func AppendData(dst []byte, id uint32, endStream bool, data []byte) []byte {
	var f Flags
	if endStream {
		f = FlagEndStream
	}
	dst = AppendHeader(dst, Header{Length: uint32(len(data)), Type: TypeData, Flags: f, Stream: id})
	return append(dst, data...)
}

// AppendHeaders appends a header block on stream id as one HEADERS frame
// followed by as many CONTINUATION frames as frames of at most maxSize
// bytes need (RFC 9113 §4.3: nothing may come between them).
func AppendHeaders(dst []byte, id uint32, endStream bool, block []byte, maxSize uint32) []byte {
	t := TypeHeaders
	var f Flags
	if endStream {
		f = FlagEndStream
	}
	for {
		chunk := block
		if uint32(len(chunk)) > maxSize {
			chunk = chunk[:maxSize]
		}
		block = block[len(chunk):]
		ff := f
		if len(block) == 0 {
			ff |= FlagEndHeaders
		}
		dst = AppendHeader(dst, Header{Length: uint32(len(chunk)), Type: t, Flags: ff, Stream: id})
		dst = append(dst, chunk...)
		if len(block) == 0 {
			return dst
		}
		t, f = TypeContinuation, 0
	}
}

// AppendRSTStream appends a RST_STREAM frame ending stream id with code.
func AppendRSTStream(dst []byte, id uint32, code ErrCode) []byte {
	dst = AppendHeader(dst, Header{Length: 4, Type: TypeRSTStream, Stream: id})
	return binary.BigEndian.AppendUint32(dst, uint32(code))
}

// AppendPing appends a PING frame, an acknowledgement when ack is set.
func AppendPing(dst []byte, ack bool, data [8]byte) []byte {
	var f Flags
	if ack {
		f = FlagAck
	}
	dst = AppendHeader(dst, Header{Length: 8, Type: TypePing, Flags: f})
	return append(dst, data[:]...)
}

// AppendGoAway appends a GOAWAY frame: streams above last were not and
// will not be processed.
func AppendGoAway(dst []byte, last uint32, code ErrCode, debug []byte) []byte {
	dst = AppendHeader(dst, Header{Length: uint32(8 + len(debug)), Type: TypeGoAway})
	dst = binary.BigEndian.AppendUint32(dst, last&(1<<31-1))
	dst = binary.BigEndian.AppendUint32(dst, uint32(code))
	return append(dst, debug...)
}

// AppendWindowUpdate appends a WINDOW_UPDATE frame granting inc more
// bytes on stream id (0: the connection).
func AppendWindowUpdate(dst []byte, id, inc uint32) []byte {
	dst = AppendHeader(dst, Header{Length: 4, Type: TypeWindowUpdate, Stream: id})
	return binary.BigEndian.AppendUint32(dst, inc&(1<<31-1))
}
