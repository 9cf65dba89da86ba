package websocket

// A Chunk is one piece of decoded input: a whole control frame, a whole
// data frame, or part of a data frame too large to wait for. Payload is
// unmasked in place and is a view of the buffer given to [Decoder.Next].
type Chunk struct {
	// Opcode is the frame's opcode, except that the frames of a
	// fragmented message all report the message's opcode (OpText or
	// OpBinary), continuation frames included.
	Opcode Opcode
	// Payload is this chunk's part of the frame's payload, unmasked.
	Payload []byte
	// First is set on the first chunk of a message (always, for control
	// frames).
	First bool
	// Final is set on the last chunk of a message (always, for control
	// frames): the chunk ends a frame with the FIN bit.
	Final bool
	// Compressed is set on every chunk of a message whose first frame had
	// RSV1 set under permessage-deflate: the concatenated payload is to be
	// inflated (RFC 7692 §7.2.2).
	Compressed bool
	// CloseCode and CloseReason hold an OpClose frame's parsed payload.
	CloseCode   StatusCode
	CloseReason []byte
}

// A Decoder turns a byte stream into frames and checks it against RFC
// 6455: masking in the right direction, reserved bits and opcodes,
// control frame rules, fragmentation order, the size limits, close
// payloads, and UTF-8 in text messages (across frames and chunks; for
// compressed messages, after inflating, which is the caller's job).
//
// It is a pure state machine over byte slices: it does no I/O, never
// allocates, and never copies a payload; it unmasks payloads in place in
// the buffer it is given. The zero value decodes frames from a client
// with no size limit and no extension.
type Decoder struct {
	// FromServer decodes frames sent by a server, which must be unmasked.
	// The default decodes a client's frames, which must be masked.
	FromServer bool
	// Deflate accepts RSV1 on a message's first frame (permessage-deflate
	// negotiated).
	Deflate bool
	// MaxFrame and MaxMessage bound a data frame's payload and a
	// message's total payload (before inflating), in bytes; 0 means no
	// limit. Over either, Next fails with close code 1009.
	MaxFrame, MaxMessage int64
	// WaitLimit is the largest data frame (header and payload) that Next
	// waits for in one piece, returning ErrNeedMore until all of it is
	// buffered, so the caller sees the payload as one contiguous view.
	// Larger frames are returned in chunks as the input arrives. 0 means
	// 64 KiB.
	WaitLimit int

	// The frame being streamed in chunks: its payload bytes still to
	// come and where the masking key's cycle stands; and the message in
	// progress, between its first and final frames. The small fields sit
	// together after the words, so a Decoder (in every connection) has no
	// padding holes.
	remaining  int64
	msgLen     int64
	mask       [4]byte
	maskPos    uint8 // where the key's cycle stands: 0..3
	utf8       utf8Validator
	masked     bool
	frameFin   bool
	streaming  bool
	inMessage  bool
	msgOp      Opcode
	compressed bool
}

const defaultWaitLimit = 64 << 10

// Reset forgets any frame or message in progress, keeping the settings.
func (d *Decoder) Reset() {
	d.remaining, d.maskPos, d.masked, d.frameFin, d.streaming = 0, 0, false, false, false
	d.inMessage, d.msgOp, d.compressed, d.msgLen = false, 0, false, 0
	d.utf8.reset()
}

// InMessage reports whether a fragmented message has begun and not ended.
func (d *Decoder) InMessage() bool { return d.inMessage || d.streaming }

// Next decodes the next chunk from the start of b and returns it with the
// number of bytes of b it consumed. It returns ErrNeedMore (and 0) when b
// does not hold enough for a chunk, and a *ProtocolError when the stream
// breaks the protocol, after which the decoder must not be used again
// (the connection is to be failed with the error's Code).
//
// The chunk's Payload aliases b. Next unmasks exactly the bytes it
// consumes, so the caller passes the unconsumed rest (and what follows)
// on the next call.
func (d *Decoder) Next(b []byte) (Chunk, int, error) {
	if d.streaming {
		return d.continueFrame(b)
	}
	h, hn, err := ParseHeader(b)
	if err != nil {
		return Chunk{}, 0, err
	}
	if err := d.check(&h); err != nil {
		return Chunk{}, 0, err
	}
	total := int64(hn) + h.Length
	if h.Opcode.IsControl() {
		if int64(len(b)) < total {
			return Chunk{}, 0, ErrNeedMore
		}
		p := b[hn:total:total]
		if h.Masked {
			MaskBytes(h.Mask, 0, p)
		}
		ch := Chunk{Opcode: h.Opcode, Payload: p, First: true, Final: true}
		if h.Opcode == OpClose {
			code, reason, err := ParseClosePayload(p)
			if err != nil {
				return Chunk{}, 0, err
			}
			ch.CloseCode, ch.CloseReason = code, reason
		}
		return ch, int(total), nil
	}

	// A data frame. check has settled which message it belongs to.
	first := h.Opcode != OpContinuation
	if first {
		d.msgOp = h.Opcode
		d.compressed = h.Rsv&Rsv1 != 0
		d.msgLen = 0
		d.utf8.reset()
	}
	if d.MaxMessage > 0 && d.msgLen+h.Length > d.MaxMessage {
		return Chunk{}, 0, errMessageTooBig
	}
	wait := int64(d.WaitLimit)
	if wait <= 0 {
		wait = defaultWaitLimit
	}
	if int64(len(b)) < total && total <= wait {
		return Chunk{}, 0, ErrNeedMore
	}
	// Either the whole frame is here or it is too large to wait for:
	// take the header and what payload there is.
	d.msgLen += h.Length
	d.inMessage = !h.Fin
	avail := min(int64(len(b)-hn), h.Length)
	p := b[hn : int64(hn)+avail : int64(hn)+avail]
	pos := 0
	if h.Masked {
		pos = MaskBytes(h.Mask, 0, p)
	}
	ch := Chunk{Opcode: d.msgOp, Payload: p, First: first, Compressed: d.compressed}
	if avail < h.Length {
		d.streaming = true
		d.remaining = h.Length - avail
		d.mask, d.maskPos, d.masked, d.frameFin = h.Mask, uint8(pos), h.Masked, h.Fin // pos < 4
		d.inMessage = true
	} else {
		ch.Final = h.Fin
	}
	if err := d.checkText(&ch); err != nil {
		return Chunk{}, 0, err
	}
	return ch, hn + int(avail), nil
}

// continueFrame returns the next piece of a frame being streamed.
func (d *Decoder) continueFrame(b []byte) (Chunk, int, error) {
	if len(b) == 0 {
		return Chunk{}, 0, ErrNeedMore
	}
	n := min(int64(len(b)), d.remaining)
	p := b[:n:n]
	if d.masked {
		d.maskPos = uint8(MaskBytes(d.mask, int(d.maskPos), p)) // < 4
	}
	d.remaining -= n
	ch := Chunk{Opcode: d.msgOp, Payload: p, Compressed: d.compressed}
	if d.remaining == 0 {
		d.streaming = false
		if d.frameFin {
			d.inMessage = false
			ch.Final = true
		}
	}
	if err := d.checkText(&ch); err != nil {
		return Chunk{}, 0, err
	}
	return ch, int(n), nil
}

// checkText validates an uncompressed text chunk's UTF-8 incrementally.
func (d *Decoder) checkText(ch *Chunk) error {
	if ch.Opcode != OpText || ch.Compressed {
		return nil
	}
	if !d.utf8.write(ch.Payload) {
		return errTextUTF8
	}
	if ch.Final && !d.utf8.complete() {
		return errTextUTF8
	}
	return nil
}

// check applies the header rules of §5.1–5.5 and the limits.
func (d *Decoder) check(h *Header) error {
	if h.Masked == d.FromServer {
		if d.FromServer {
			return errMaskedFromServer
		}
		return errUnmasked
	}
	if h.Opcode.IsReserved() {
		return errReservedOpcode
	}
	rsv := h.Rsv
	if d.Deflate && h.Opcode != OpContinuation && !h.Opcode.IsControl() {
		rsv &^= Rsv1 // RSV1 marks the first frame of a compressed message
	}
	if rsv != 0 {
		return errReservedBits
	}
	if h.Opcode.IsControl() {
		if !h.Fin {
			return errControlFragmented
		}
		if h.Length > MaxControlPayload {
			return errControlTooLong
		}
		return nil
	}
	switch {
	case h.Opcode == OpContinuation && !d.inMessage:
		return errUnexpectedContinue
	case h.Opcode != OpContinuation && d.inMessage:
		return errExpectedContinue
	}
	if d.MaxFrame > 0 && h.Length > d.MaxFrame {
		return errFrameTooBig
	}
	return nil
}
