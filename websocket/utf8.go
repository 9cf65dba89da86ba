package websocket

import "unicode/utf8"

// utf8Validator checks UTF-8 that arrives in pieces (a text message split
// across frames, or a frame across reads): a code point cut at a piece's
// end is carried to the next one. It fails as soon as the bytes seen can
// no longer begin valid UTF-8, not only at the message's end.
type utf8Validator struct {
	carry [4]byte
	n     uint8 // bytes in carry: a valid, incomplete sequence
}

// write checks p as the next piece and reports whether the input so far
// is still a valid prefix of UTF-8.
func (v *utf8Validator) write(p []byte) bool {
	if v.n > 0 {
		need := seqLen(v.carry[0])
		for int(v.n) < need && len(p) > 0 {
			v.carry[v.n] = p[0]
			v.n++
			p = p[1:]
		}
		if int(v.n) < need {
			return validPrefix(v.carry[:v.n])
		}
		if !utf8.Valid(v.carry[:v.n]) {
			return false
		}
		v.n = 0
	}
	// An incomplete sequence can only start in the last three bytes.
	tail := len(p)
	for i := len(p) - 1; i >= 0 && i >= len(p)-3; i-- {
		if p[i]&0xC0 == 0x80 {
			continue // continuation byte: keep looking for the start
		}
		if p[i] >= 0xC0 && !utf8.FullRune(p[i:]) {
			tail = i
		}
		break
	}
	if !utf8.Valid(p[:tail]) {
		return false
	}
	if rest := p[tail:]; len(rest) > 0 {
		if !validPrefix(rest) {
			return false
		}
		v.n = uint8(copy(v.carry[:], rest))
	}
	return true
}

// complete reports whether the input ended on a code point boundary, and
// resets v for the next message.
func (v *utf8Validator) complete() bool {
	ok := v.n == 0
	v.n = 0
	return ok
}

func (v *utf8Validator) reset() { v.n = 0 }

// seqLen returns the length of the sequence a valid lead byte starts.
func seqLen(lead byte) int {
	switch {
	case lead < 0xE0:
		return 2
	case lead < 0xF0:
		return 3
	}
	return 4
}

// validPrefix reports whether b, shorter than the sequence its first byte
// announces, can still be completed into a valid code point (RFC 3629:
// no overlong forms, no surrogates, nothing above U+10FFFF).
func validPrefix(b []byte) bool {
	lead := b[0]
	if lead < 0xC2 || lead > 0xF4 || len(b) >= seqLen(lead) {
		return false
	}
	if len(b) >= 2 {
		lo, hi := byte(0x80), byte(0xBF)
		switch lead {
		case 0xE0:
			lo = 0xA0
		case 0xED:
			hi = 0x9F
		case 0xF0:
			lo = 0x90
		case 0xF4:
			hi = 0x8F
		}
		if b[1] < lo || b[1] > hi {
			return false
		}
	}
	if len(b) >= 3 && b[2]&0xC0 != 0x80 {
		return false
	}
	return true
}
