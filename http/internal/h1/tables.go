package h1

import (
	"encoding/binary"
	"math/bits"
)

// Character classes, the bits of CharClass. The request parser in package
// http, the chunked decoder and the response writer test bytes with them.
const (
	ClassToken  = 1 << iota // tchar (RFC 9110 §5.6.2)
	ClassTarget             // VCHAR, allowed in a request-target
	ClassValue              // field-vchar, SP or HTAB (RFC 9110 §5.5)
	ClassHost               // characters of uri-host [ ":" port ]
	ClassHex                // HEXDIG
	ClassQdText             // qdtext (RFC 9110 §5.6.4)
)

// CharClass holds the classes of each byte. It is computed once at
// package initialisation and never modified afterwards.
var CharClass = func() (t [256]uint8) {
	for c := 0; c < 256; c++ {
		var m uint8
		isAlpha := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		isDigit := '0' <= c && c <= '9'
		if isAlpha || isDigit {
			m |= ClassToken | ClassHost
		}
		switch c {
		case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
			m |= ClassToken
		}
		switch c {
		case '-', '.', '_', '~', '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=', ':', '[', ']', '%':
			m |= ClassHost
		}
		if 0x21 <= c && c <= 0x7e {
			m |= ClassTarget | ClassValue
		}
		if c >= 0x80 || c == ' ' || c == '\t' {
			m |= ClassValue
		}
		if isDigit || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' {
			m |= ClassHex
		}
		if c == '\t' || c == ' ' || c == 0x21 || 0x23 <= c && c <= 0x5b || 0x5d <= c && c <= 0x7e || c >= 0x80 {
			m |= ClassQdText
		}
		t[c] = m
	}
	return t
}()

// IsToken reports whether c is a tchar.
func IsToken(c byte) bool { return CharClass[c]&ClassToken != 0 }

// ValidToken reports whether b is a non-empty token.
func ValidToken(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if CharClass[c]&ClassToken == 0 {
			return false
		}
	}
	return true
}

// Lower maps an ASCII byte to lower case.
func Lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}

// EqualFold reports whether b equals s under ASCII case folding.
func EqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if b[i] != s[i] && Lower(b[i]) != Lower(s[i]) {
			return false
		}
	}
	return true
}

// TokenEqualFold is EqualFold for a token b and a name s made of lower-case
// letters and '-' (a field name the parser looks for). Setting bit 0x20
// folds an upper-case letter to lower case, and turns no other token byte
// into a lower-case letter or '-' (only CR would become '-', and a field
// value holds none either, so b may also be a part of one), so the
// bytes are compared a word at a time with one OR and one compare, the
// last word overlapping the one before (a byte at a time, Connection
// cost 100 instructions, callgrind).
func TokenEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	const fold = 0x2020202020202020
	n := len(s)
	switch {
	case n >= 8:
		for i := 0; i < n-8; i += 8 {
			if binary.LittleEndian.Uint64(b[i:])|fold != stringWord(s[i:]) {
				return false
			}
		}
		return binary.LittleEndian.Uint64(b[n-8:])|fold == stringWord(s[n-8:])
	case n >= 4:
		return binary.LittleEndian.Uint32(b)|fold&0xffffffff == stringWord32(s) &&
			binary.LittleEndian.Uint32(b[n-4:])|fold&0xffffffff == stringWord32(s[n-4:])
	}
	for i := range len(s) {
		if b[i]|0x20 != s[i] {
			return false
		}
	}
	return true
}

// stringWord and stringWord32 read the first bytes of s as a
// little-endian word (the compiler makes it one load).
func stringWord(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

func stringWord32(s string) uint32 {
	_ = s[3]
	return uint32(s[0]) | uint32(s[1])<<8 | uint32(s[2])<<16 | uint32(s[3])<<24
}

// IsHost reports whether the token b is "Host" in any case: the
// TokenEqualFold of the field every request has, inlined, in one word
// compare.
func IsHost(b []byte) bool {
	return len(b) == 4 && binary.LittleEndian.Uint32(b)|0x20202020 == 'h'|'o'<<8|'s'<<16|'t'<<24
}

// HostLine reports whether the field line starting at b[i] starts with
// "Host:", the name in any case: the one field every HTTP/1.1 request
// has is told, and its name's end found, in one word compare. The colon
// is compared exactly: only letters are folded.
func HostLine(b []byte, i int) bool {
	const host = 'h' | 'o'<<8 | 's'<<16 | 't'<<24 | ':'<<32
	return i+8 <= len(b) && binary.LittleEndian.Uint64(b[i:])&(1<<40-1)|0x20202020 == host
}

// TrimOWS removes leading and trailing SP and HTAB.
func TrimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

// NextListElem splits the first element off a comma-separated list
// (RFC 9110 §5.6.1). It returns the element with OWS trimmed and the rest
// of the list after the comma. Empty elements are returned as empty slices;
// callers skip them, as the RFC requires recipients to.
func NextListElem(list []byte) (elem, rest []byte) {
	for i, c := range list {
		if c == ',' {
			return TrimOWS(list[:i]), list[i+1:]
		}
	}
	return TrimOWS(list), nil
}

// Word-at-a-time scanning: each helper returns a mask whose high bit is
// set in every byte lane that may need a closer look. It never misses such
// a byte; it may flag a clean byte above a flagged one (borrow), which
// only sends the caller to its exact byte loop earlier.
const (
	lanes01 = 0x0101010101010101
	lanes80 = 0x8080808080808080
)

// specialValue reports lanes holding a byte < 0x20 or 0x7f: the bytes of a
// field value other than HTAB that are not allowed, and HTAB itself.
func specialValue(x uint64) uint64 {
	y := x ^ (0x7f * lanes01)
	return ((x-0x20*lanes01) & ^x | (y-lanes01) & ^y) & lanes80
}

// specialTarget reports lanes holding a byte <= 0x20 or >= 0x7f, i.e.
// anything but VCHAR.
func specialTarget(x uint64) uint64 {
	return ((x-0x21*lanes01)&^x | (x + lanes01) | x) & lanes80
}

// ValueLen returns the length of the prefix of b made of field-value bytes
// (VCHAR, obs-text, SP, HTAB).
func ValueLen(b []byte) int {
	i := 0
	for i+8 <= len(b) {
		if m := specialValue(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			// The lowest flagged lane is exact (a borrow only runs upward
			// from a flagged lane): a byte that ends the value, or an HTAB
			// inside it, after which the words go on.
			i += bits.TrailingZeros64(m) >> 3
			if b[i] != '\t' {
				return i
			}
			i -= 7
		}
		i += 8
	}
	return i + classLen(b[i:], ClassValue)
}

// TargetQuery returns the length n of the prefix of b made of VCHARs, as
// TargetLen, and where the first '?' in it is (-1 if none): the end of
// a request-target and of its path, in one pass. A word that holds a '?'
// is flagged as one holding the end is, and the scan goes on after the
// '?'; the lowest flagged lane of either test is exact, so of the two
// together too.
func TargetQuery(b []byte) (n, query int) {
	const qmarks = '?' * lanes01
	query = -1
	i := 0
	for i+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[i:])
		q := x ^ qmarks
		m := specialTarget(x) | (q-lanes01)&^q&lanes80
		if m == 0 {
			i += 8
			continue
		}
		i += bits.TrailingZeros64(m) >> 3
		if b[i] != '?' {
			return i, query
		}
		if query < 0 {
			query = i
		}
		i++
	}
	for ; i < len(b) && CharClass[b[i]]&ClassTarget != 0; i++ {
		if b[i] == '?' && query < 0 {
			query = i
		}
	}
	return i, query
}

// ShortTarget returns the length of the request-target starting at b[i]
// when it ends, at a SP, within the word there and holds no '?' (a path
// of at most 7 bytes: "/", "/json"), or 0 for any other: TargetQuery
// then scans it. It is TargetQuery's first word, small enough to be
// inlined: the call for "/" cost 54 instructions (callgrind,
// BenchmarkServerFastPath/epoll/depth=16).
func ShortTarget(b []byte, i int) int {
	if i+8 > len(b) {
		return 0
	}
	x := binary.LittleEndian.Uint64(b[i:])
	q := x ^ '?'*lanes01
	// The lowest flagged lane is exact: the SP that ends the target, or
	// a '?' or another byte TargetQuery must see.
	n := bits.TrailingZeros64(specialTarget(x)|(q-lanes01)&^q&lanes80) >> 3
	if n >= 8 || byte(x>>(8*n)) != ' ' {
		return 0
	}
	return n
}

// TargetLen returns the length of the prefix of b made of VCHARs.
func TargetLen(b []byte) int {
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if m := specialTarget(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			// The lowest flagged lane is exact: a borrow or carry only
			// runs upward from a flagged lane.
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	return i + classLen(b[i:], ClassTarget)
}

// ClassEnd returns the end of the run of bytes of class in b starting
// at i: a field name's tchars (as TokenLen), or a Host value's uri-host
// and port bytes. It tests four bytes a step with one test for all (as
// the Host check): 8 instructions a byte in a byte loop, about 4 here.
// It works on an index rather than a subslice, and is small enough to be
// inlined, so that a field-line loop makes no call and keeps few values
// live.
func ClassEnd(b []byte, i int, class uint8) int {
	t := &CharClass
	for ; i+4 <= len(b); i += 4 {
		w := b[i : i+4] // one bounds check for the four bytes
		if t[w[0]]&t[w[1]]&t[w[2]]&t[w[3]]&class == 0 {
			break
		}
	}
	for ; i < len(b) && t[b[i]]&class != 0; i++ {
	}
	return i
}

// PlainValueEnd returns the end of the run of VCHAR, obs-text and SP
// bytes in b starting at i: a field value's bytes but HTAB, which a plain
// value has none of. It reads a word at a time and is small enough (as
// written: the named result keeps it under the inlining budget) to be
// inlined as ClassEnd is.
func PlainValueEnd(b []byte, i int) (end int) {
	for ; i+8 <= len(b); i += 8 {
		if m := specialValue(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			// The lowest flagged lane is exact: the CR, or a byte the
			// caller must judge (HTAB included).
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	// The tail stops at HTAB as the words do.
	for ; i < len(b) && b[i] >= ' ' && b[i] != 0x7f; i++ {
	}
	return i
}

// PlainVersion reports whether b starts with "HTTP/1.", a digit and
// CRLF, the end of nearly every request-line, in two word compares (the
// byte compares it replaces cost 41 instructions, callgrind).
func PlainVersion(b []byte) bool {
	const (
		prefix = 'H' | 'T'<<8 | 'T'<<16 | 'P'<<24 | '/'<<32 | '1'<<40 | '.'<<48 // "HTTP/1."
		crlf   = '\r' | '\n'<<8
	)
	if len(b) < 10 {
		return false
	}
	// The digit is taken from the word: reading b[7] again made the
	// compiler assemble the word a byte at a time.
	w := binary.LittleEndian.Uint64(b)
	return w&(1<<56-1) == prefix && byte(w>>56)-'0' <= 9 && binary.LittleEndian.Uint16(b[8:]) == crlf
}

// TokenLen returns the length of the prefix of b made of tchars.
func TokenLen(b []byte) int { return classLen(b, ClassToken) }

// classLen returns the length of the prefix of b whose bytes are all in
// class, a byte at a time.
func classLen(b []byte, class uint8) int {
	for i, c := range b {
		if CharClass[c]&class == 0 {
			return i
		}
	}
	return len(b)
}
