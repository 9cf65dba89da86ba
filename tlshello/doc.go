// Package tlshello parses the TLS ClientHello at the start of a TCP stream
// without terminating TLS.
//
// It is for proxies that pass TLS through to a backend chosen by the server
// name (SNI) or the application protocols (ALPN) the client asks for: the
// proxy reads the first bytes of a connection, hands them to
// [ClientHello.Parse], picks a backend and forwards all the bytes it has
// read, hello included, unchanged. The package does no I/O, starts no
// goroutines and uses only the standard library.
//
// Parse takes the bytes read so far and answers with one of
//
//   - nil: the ClientHello is complete and its fields are set;
//   - [ErrNeedMore]: the bytes start a ClientHello and are correct so far,
//     but more are needed; read more and call Parse again with all of them;
//   - [ErrNotTLS]: the stream does not start with a TLS handshake record
//     carrying a ClientHello (plain HTTP, an SSL 2.0-style hello, another
//     protocol), decided from the first byte where it can be;
//   - an error wrapping [ErrMalformed] that says what was wrong;
//   - an error wrapping [ErrTooLarge]: the ClientHello would take more than
//     [MaxLen] bytes.
//
// A ClientHello may be split across several handshake records, as
// RFC 8446 §5.1 allows; Parse reassembles it. Its records may take at most
// MaxLen (17 KiB) bytes of the stream, record headers included, so a caller
// never needs to buffer more than that before Parse gives a final answer.
// Hellos with post-quantum key shares, such as X25519MLKEM768, take about
// 1.2 to 1.8 KB.
//
// Parse checks the syntax of the records, of the ClientHello (RFC 8446
// §4.1.2 and RFC 5246 §7.4.1.2, so hellos with and without extensions)
// and of the extensions it reports, server_name (RFC 6066 §3),
// application_layer_protocol_negotiation (RFC 7301) and supported_versions
// (RFC 8446 §4.2.1). It also enforces that no extension appears twice and
// that pre_shared_key comes last (RFC 8446 §4.2), that the ClientHello
// ends where its last record does (§5.1), and that a host_name is
// not empty, has no trailing dot and is ASCII (RFC 6066; Parse refuses
// controls and spaces too). The contents of other
// extensions, such as key shares, are skipped unread.
package tlshello
