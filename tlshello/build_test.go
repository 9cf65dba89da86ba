package tlshello_test

import "bytes"

// Builders for ClientHellos in tests, valid and not: each returns the
// wire bytes of one TLS structure.

func cat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

func u16(x int) []byte { return []byte{byte(x >> 8), byte(x)} }

// v8 and v16 return the concatenation of parts behind a one- or two-byte
// length.
func v8(parts ...[]byte) []byte {
	b := cat(parts...)
	return cat([]byte{byte(len(b))}, b)
}

func v16(parts ...[]byte) []byte {
	b := cat(parts...)
	return cat(u16(len(b)), b)
}

func ext(typ int, data ...[]byte) []byte { return cat(u16(typ), v16(data...)) }

func sniExt(names ...string) []byte {
	var list [][]byte
	for _, n := range names {
		list = append(list, []byte{0}, v16([]byte(n)))
	}
	return ext(0, v16(list...))
}

func alpnExt(protos ...string) []byte {
	var list [][]byte
	for _, p := range protos {
		list = append(list, v8([]byte(p)))
	}
	return ext(16, v16(list...))
}

func versionsExt(vs ...int) []byte {
	var list [][]byte
	for _, v := range vs {
		list = append(list, u16(v))
	}
	return ext(43, v8(list...))
}

// body returns a ClientHello body with legacy_version 0x0303, an empty
// session id, two cipher suites, the null compression method and exts as
// its extensions block.
func body(exts ...[]byte) []byte {
	return cat(prelude(0x0303), v16(exts...))
}

// prelude returns the fields of a ClientHello body before its extensions.
func prelude(version int) []byte {
	return cat(u16(version), make([]byte, 32), v8(), v16(u16(0x1301), u16(0xc02f)), v8([]byte{0}))
}

// message returns a handshake message of type client_hello.
func message(body []byte) []byte {
	n := len(body)
	return cat([]byte{1, byte(n >> 16), byte(n >> 8), byte(n)}, body)
}

// record returns a handshake record carrying frag.
func record(frag []byte) []byte { return cat([]byte{22, 3, 1}, u16(len(frag)), frag) }

// hello returns a ClientHello with exts in one record.
func hello(exts ...[]byte) []byte { return record(message(body(exts...))) }

// split returns msg in records of the given sizes, the rest in a last one.
func split(msg []byte, sizes ...int) []byte {
	var b []byte
	for _, n := range sizes {
		n = min(n, len(msg))
		if n == 0 {
			break
		}
		b = append(b, record(msg[:n])...)
		msg = msg[n:]
	}
	if len(msg) > 0 {
		b = append(b, record(msg)...)
	}
	return b
}

// fragments returns the handshake bytes carried by the records that start
// b, stopping at the first incomplete record.
func fragments(b []byte) []byte {
	var msg []byte
	for len(b) >= 5 {
		n := int(b[3])<<8 | int(b[4])
		if len(b) < 5+n {
			break
		}
		msg = append(msg, b[5:5+n]...)
		b = b[5+n:]
	}
	return msg
}

// endsEarly reports whether b ends before the records at its start have
// carried the whole handshake message their first four bytes announce:
// inside a record header, inside a record, or before the next record.
// It reads only the headers, as an oracle independent of Parse.
func endsEarly(b []byte) bool {
	var hs []byte // the first four handshake bytes
	size, carried := -1, 0
	for size < 0 || carried < size {
		if len(b) < 5 {
			return true
		}
		n := int(b[3])<<8 | int(b[4])
		frag := b[5:min(5+n, len(b))]
		hs = append(hs, frag[:min(len(frag), 4-len(hs))]...)
		carried += n
		if size < 0 && len(hs) == 4 {
			size = 4 + (int(hs[1])<<16 | int(hs[2])<<8 | int(hs[3]))
		}
		if len(frag) < n {
			return true
		}
		b = b[5+n:]
	}
	return false
}
