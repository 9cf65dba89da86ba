package tlshello

import (
	"errors"
	"slices"
)

// MaxLen is the most bytes of a stream a ClientHello may take, record
// headers included: 16 KiB for the handshake message, which is what one
// record can hold, and 1 KiB for the headers of the records it is split
// into. A ClientHello that needs more is refused with ErrTooLarge, so a
// caller that buffers until Parse stops returning ErrNeedMore buffers at
// most MaxLen bytes.
const MaxLen = 17 << 10

// Errors returned by Parse. Callers test for them with errors.Is: the
// errors for a malformed or oversized ClientHello wrap ErrMalformed or
// ErrTooLarge with a message saying what was wrong.
var (
	// ErrNeedMore means the bytes so far start a ClientHello and nothing
	// wrong has been found in them, but the hello is not complete.
	ErrNeedMore = errors.New("tlshello: incomplete ClientHello")

	// ErrNotTLS means the stream does not start with a TLS handshake
	// record carrying a ClientHello: its first byte is not 22 (handshake),
	// its second is not 3 (the major version of SSL 3.0 and every TLS),
	// or the first handshake message is not a client_hello. Plain-text
	// protocols and SSL 2.0-style hellos, whose first byte has its high bit
	// set, are refused from the first byte.
	ErrNotTLS = errors.New("tlshello: not a TLS ClientHello")

	// ErrMalformed means the stream starts like a TLS ClientHello but
	// breaks the syntax or a rule of RFC 8446, RFC 5246, RFC 6066 or
	// RFC 7301.
	ErrMalformed = errors.New("tlshello: malformed ClientHello")

	// ErrTooLarge means the ClientHello would take more than MaxLen bytes.
	ErrTooLarge = errors.New("tlshello: ClientHello larger than MaxLen")
)

// TLS constants from RFC 8446 §4, §4.2 and §5.1.
const (
	recordHeaderLen    = 5       // type, legacy_record_version, length
	maxFragment        = 1 << 14 // longest record fragment
	handshakeHeaderLen = 4       // msg_type, uint24 length

	typeHandshake   = 22 // ContentType handshake
	typeClientHello = 1  // HandshakeType client_hello

	extServerName        = 0
	extALPN              = 16
	extPreSharedKey      = 41
	extSupportedVersions = 43
)

// A ClientHello holds what Parse found in a ClientHello message.
//
// Parse reuses a ClientHello's slices, so one value can serve every
// connection of a goroutine without allocating once its slices have grown;
// a caller that keeps a slice past the next Parse must copy it. Values
// appear as sent, GREASE values (RFC 8701) included.
type ClientHello struct {
	// Len is the number of bytes of the stream the ClientHello took,
	// record headers included. The records end where the ClientHello ends.
	Len int

	// LegacyVersion is the legacy_version field, 0x0303 (TLS 1.2) for
	// TLS 1.3 clients, which list the versions they support in
	// SupportedVersions instead.
	LegacyVersion uint16

	// ServerName is the host_name of the server_name extension
	// (RFC 6066 §3), or "" if the hello has none. It is the name as sent,
	// as crypto/tls's server passes it on: DNS names are case-insensitive,
	// so a caller routing by it should compare with strings.EqualFold or
	// lower-case it first. Parse has checked that it is not empty, has no
	// trailing dot and holds only printable ASCII (no controls, spaces or
	// bytes above 0x7e); it may be a literal IP address, which RFC 6066
	// forbids clients to send but some do.
	ServerName string

	// ALPN lists the protocols of the application_layer_protocol_negotiation
	// extension (RFC 7301) in the client's order of preference, or is
	// empty if the hello has none. Protocol names are opaque bytes to
	// RFC 7301, so Parse checks only that none is empty.
	ALPN []string

	// SupportedVersions lists the versions of the supported_versions
	// extension (RFC 8446 §4.2.1), or is empty if the hello has none, as
	// from clients that support nothing later than TLS 1.2.
	SupportedVersions []uint16

	// CipherSuites lists the cipher_suites field.
	CipherSuites []uint16

	name string   // the last ServerName allocated, reused while it repeats
	buf  []byte   // the handshake message, reassembled when it spans records
	high []uint16 // extension types of 64 and more, to find duplicates
}

// Parse parses the ClientHello at the start of b, the first bytes a client
// sent on a connection, and sets h's fields from it. It returns nil once b
// holds the whole ClientHello and ErrNeedMore while b is a correct but
// incomplete prefix of one; after more bytes arrive, the caller calls Parse
// again with all of them. Bytes of b after the ClientHello are ignored. On
// any error h's fields are zero (its slices empty).
//
// Parse is a method so that a ClientHello can be reused, by a proxy loop for
// every connection it accepts. Once a reused value's slices have grown, a
// hello parses without allocating, in one record or several, if its server
// name is the last one the value allocated and each of its protocols is
// h2, http/1.1, acme-tls/1 or the one at the same place in the value's
// last ALPN; a new name or protocol costs one allocation.
func (h *ClientHello) Parse(b []byte) error {
	h.reset()
	if err := h.parse(b); err != nil {
		h.reset()
		return err
	}
	return nil
}

func (h *ClientHello) reset() {
	h.Len = 0
	h.LegacyVersion = 0
	h.ServerName = ""
	h.ALPN = h.ALPN[:0]
	h.SupportedVersions = h.SupportedVersions[:0]
	h.CipherSuites = h.CipherSuites[:0]
}

func (h *ClientHello) parse(b []byte) error {
	msg, size, end, err := h.records(b)
	if err != nil && err != ErrNeedMore {
		return err
	}
	if size < 0 {
		return err // the handshake header is not in hand yet
	}
	body := vector{b: msg[handshakeHeaderLen:], left: size - handshakeHeaderLen}
	if berr := h.parseBody(&body); berr != nil {
		return berr
	}
	if err != nil {
		return err // all in hand was right, but some is still to come
	}
	h.Len = end
	return nil
}

// records walks the handshake records at the start of b. It returns the
// part of the handshake message they carry that is in hand (header
// included), the size of the whole message once its header is in hand and
// -1 before, and the offset in b where the records end once they are all
// in hand. A message that spans records is copied into h.buf; one that
// fits in the first record is returned as part of b.
func (h *ClientHello) records(b []byte) (msg []byte, size, end int, err error) {
	size = -1
	carried := 0 // handshake bytes the records so far declare
	copied := false
	off := 0
	for size < 0 || carried < size {
		first := off == 0
		hdr := b[off:min(off+recordHeaderLen, len(b))]
		if len(hdr) > 0 && hdr[0] != typeHandshake {
			if first {
				return nil, -1, 0, ErrNotTLS
			}
			return nil, -1, 0, malformed("record of type %d inside the ClientHello", hdr[0])
		}
		if first && len(hdr) > 1 && hdr[1] != 3 {
			return nil, -1, 0, ErrNotTLS
		}
		if len(hdr) < recordHeaderLen {
			return msg, size, 0, ErrNeedMore
		}
		n := int(hdr[3])<<8 | int(hdr[4])
		if n == 0 {
			return nil, -1, 0, malformed("empty handshake record")
		}
		if n > maxFragment {
			return nil, -1, 0, malformed("record length %d exceeds 2^14", n)
		}
		carried += n
		if size >= 0 && carried > size {
			return nil, -1, 0, malformed("records carry %d bytes past the ClientHello", carried-size)
		}
		off += recordHeaderLen
		if off+n > MaxLen {
			return nil, -1, 0, tooLarge(off + n)
		}
		frag := b[off:min(off+n, len(b))]
		off += n
		switch {
		case first:
			msg = frag
		case !copied:
			h.buf = append(append(h.buf[:0], msg...), frag...)
			msg, copied = h.buf, true
		default:
			h.buf = append(h.buf, frag...)
			msg = h.buf
		}
		if size < 0 && len(msg) > 0 && msg[0] != typeClientHello {
			return nil, -1, 0, ErrNotTLS
		}
		if size < 0 && len(msg) >= handshakeHeaderLen {
			size = handshakeHeaderLen + (int(msg[1])<<16 | int(msg[2])<<8 | int(msg[3]))
			if carried > size {
				return nil, -1, 0, malformed("records carry %d bytes past the ClientHello", carried-size)
			}
			// Even split into the fewest records it needs, the
			// message takes this much of the stream.
			if least := size + recordHeaderLen*((size+maxFragment-1)/maxFragment); least > MaxLen {
				return nil, -1, 0, tooLarge(least)
			}
		}
		if len(frag) < n {
			return msg, size, 0, ErrNeedMore
		}
	}
	return msg, size, off, nil
}

func tooLarge(n int) error {
	return errorf(ErrTooLarge, "needs at least %d bytes, limit %d", n, MaxLen)
}

// parseBody parses the body of a ClientHello message (RFC 8446 §4.1.2,
// RFC 5246 §7.4.1.2), all of it or the part in hand.
func (h *ClientHello) parseBody(m *vector) error {
	v, err := m.u16("legacy_version")
	if err != nil {
		return err
	}
	if v>>8 != 3 {
		return malformed("legacy_version %#04x is neither SSL 3.0 nor TLS", v)
	}
	h.LegacyVersion = uint16(v)
	if _, err := m.take(32, "random"); err != nil {
		return err
	}
	var skip, suites vector
	if err := m.sub(&skip, 1, 0, 32, "legacy_session_id"); err != nil {
		return err
	}
	if err := m.sub(&suites, 2, 2, 1<<16-2, "cipher_suites"); err != nil {
		return err
	}
	if suites.left%2 != 0 {
		return malformed("cipher_suites: odd length %d", suites.left)
	}
	h.CipherSuites = slices.Grow(h.CipherSuites, suites.left/2)
	for suites.left > 0 {
		c, err := suites.u16("cipher suite")
		if err != nil {
			return err
		}
		h.CipherSuites = append(h.CipherSuites, uint16(c))
	}
	if err := m.sub(&skip, 1, 1, 1<<8-1, "legacy_compression_methods"); err != nil {
		return err
	}
	if m.left == 0 {
		return nil // no extensions, as RFC 5246 allows
	}
	var exts vector
	if err := m.sub(&exts, 2, 0, 1<<16-1, "extensions"); err != nil {
		return err
	}
	if err := m.end(); err != nil {
		return err
	}
	return h.parseExtensions(&exts)
}

// parseExtensions parses the extensions of a ClientHello. RFC 8446 §4.2
// forbids more than one extension of a type and requires pre_shared_key
// to come last (§4.2.11).
func (h *ClientHello) parseExtensions(exts *vector) error {
	var low uint64 // the types below 64 seen so far, one bit each
	var data vector
	h.high = h.high[:0]
	for exts.left > 0 {
		typ, err := exts.u16("extension type")
		if err != nil {
			return err
		}
		if err := exts.sub(&data, 2, 0, 1<<16-1, extensionName(typ)); err != nil {
			return err
		}
		if typ < 64 {
			if low&(1<<typ) != 0 {
				return duplicate(typ)
			}
			low |= 1 << typ
		} else {
			h.high = append(h.high, uint16(typ))
		}
		switch typ {
		case extServerName:
			err = h.parseServerName(&data)
		case extALPN:
			err = h.parseALPN(&data)
		case extSupportedVersions:
			err = h.parseSupportedVersions(&data)
		case extPreSharedKey:
			if exts.left > 0 {
				err = malformed("pre_shared_key is not the last extension")
			}
		}
		if err != nil {
			return err
		}
	}
	// Extension types of 64 and more are rare (GREASE, encrypted_client_hello,
	// renegotiation_info), so sorting them finds duplicates in little time
	// however many a hostile hello lists.
	if len(h.high) > 1 {
		slices.Sort(h.high)
		for i := 1; i < len(h.high); i++ {
			if h.high[i] == h.high[i-1] {
				return duplicate(int(h.high[i]))
			}
		}
	}
	return nil
}

func duplicate(typ int) error {
	if name := extensionName(typ); name != "extension_data" {
		return malformed("extension %d (%s) appears twice", typ, name)
	}
	return malformed("extension %d appears twice", typ)
}

func extensionName(typ int) string {
	switch typ {
	case extServerName:
		return "server_name"
	case extALPN:
		return "application_layer_protocol_negotiation"
	case extPreSharedKey:
		return "pre_shared_key"
	case extSupportedVersions:
		return "supported_versions"
	}
	return "extension_data"
}

// parseServerName parses a server_name extension (RFC 6066 §3).
func (h *ClientHello) parseServerName(d *vector) error {
	var list vector
	if err := d.sub(&list, 2, 1, 1<<16-1, "server_name_list"); err != nil {
		return err
	}
	if err := d.end(); err != nil {
		return err
	}
	var types [4]uint64 // the name types seen so far, one bit each
	var name vector
	for list.left > 0 {
		t, err := list.u8("name_type")
		if err != nil {
			return err
		}
		// Only host_name (0) is defined, and RFC 6066 requires the
		// names of any later type to start with a 16-bit length too,
		// so names of other types are skipped.
		if err := list.sub(&name, 2, 0, 1<<16-1, "host_name"); err != nil {
			return err
		}
		if types[t/64]&(1<<(t%64)) != 0 {
			return malformed("server_name: two names of name_type %d", t)
		}
		types[t/64] |= 1 << (t % 64)
		if t != 0 {
			continue
		}
		if name.left == 0 {
			return malformed("server_name: empty host_name")
		}
		if !name.complete() {
			return ErrNeedMore
		}
		if err := checkHostName(name.b); err != nil {
			return err
		}
		if string(name.b) != h.name {
			h.name = string(name.b)
		}
		h.ServerName = h.name
	}
	return nil
}

// checkHostName checks a host_name: RFC 6066 makes it an ASCII string
// without a trailing dot. Parse refuses control characters and spaces too,
// which no DNS name holds, so ServerName can be logged and used as a key
// as it is.
func checkHostName(p []byte) error {
	for i, c := range p {
		if c <= ' ' || c > '~' {
			return malformed("server_name: host_name has byte %#02x at offset %d", c, i)
		}
	}
	if p[len(p)-1] == '.' {
		return malformed("server_name: host_name %q ends in a dot", p)
	}
	return nil
}

// parseALPN parses an application_layer_protocol_negotiation extension
// (RFC 7301 §3.1).
func (h *ClientHello) parseALPN(d *vector) error {
	var list vector
	if err := d.sub(&list, 2, 2, 1<<16-1, "protocol_name_list"); err != nil {
		return err
	}
	if err := d.end(); err != nil {
		return err
	}
	var p vector
	for list.left > 0 {
		if err := list.sub(&p, 1, 0, 1<<8-1, "protocol name"); err != nil {
			return err
		}
		if p.left == 0 {
			return malformed("application_layer_protocol_negotiation: empty protocol name")
		}
		if !p.complete() {
			return ErrNeedMore
		}
		h.ALPN = append(h.ALPN, h.protocol(p.b))
	}
	return nil
}

// protocol returns p, the next protocol of h.ALPN, as a string. It
// allocates only for a protocol other than the common ones and other than
// the one at the same place the last time h was used.
func (h *ClientHello) protocol(p []byte) string {
	switch string(p) {
	case "h2":
		return "h2"
	case "http/1.1":
		return "http/1.1"
	case "acme-tls/1":
		return "acme-tls/1" // RFC 8737, which a proxy may route apart
	}
	if i := len(h.ALPN); i < cap(h.ALPN) {
		if old := h.ALPN[: i+1 : i+1][i]; old == string(p) {
			return old
		}
	}
	return string(p)
}

// parseSupportedVersions parses a supported_versions extension as a
// ClientHello carries it (RFC 8446 §4.2.1).
func (h *ClientHello) parseSupportedVersions(d *vector) error {
	var list vector
	if err := d.sub(&list, 1, 2, 254, "versions"); err != nil {
		return err
	}
	if err := d.end(); err != nil {
		return err
	}
	if list.left%2 != 0 {
		return malformed("supported_versions: odd length %d", list.left)
	}
	h.SupportedVersions = slices.Grow(h.SupportedVersions, list.left/2)
	for list.left > 0 {
		v, err := list.u16("version")
		if err != nil {
			return err
		}
		h.SupportedVersions = append(h.SupportedVersions, uint16(v))
	}
	return nil
}
