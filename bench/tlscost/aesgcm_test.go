// Package tlscost measures what TLS's cryptography costs by itself, apart
// from any server, so that bench/tls.sh can set a TLS server's extra CPU per
// message (TLS echo against plaintext echo) or per connection (a full
// handshake) against the part no implementation can avoid:
//
//   - BenchmarkSealOpen: AES-128-GCM (TLS_AES_128_GCM_SHA256, what every
//     server in tls.sh negotiates on a machine with AES instructions) seals
//     and opens one TLS 1.3 record of 64 B and of 16 KiB, as an echo server
//     does once per message: it opens the client's record and seals its
//     answer;
//   - BenchmarkHandshakeCrypto: the public-key work a server does in each
//     full TLS 1.3 handshake with an ECDSA P-256 certificate and X25519
//     (a key pair, the shared secret, one signature). HKDF, the transcript
//     hash and the records are not in it.
//
// Run from bench/ (tls.sh runs it on the server's CPU):
//
//	go test -run '^$' -bench . ./tlscost
package tlscost

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"testing"
)

// tlsRecord is a TLS 1.3 record's shape for a payload of size bytes: the
// inner plaintext (the payload and its content-type byte) and the 5-byte
// header that is the AEAD's additional data.
func tlsRecord(size int) (plain, header []byte) {
	plain = make([]byte, size+1)
	for i := range plain {
		plain[i] = byte(i)
	}
	plain[size] = 23 // application_data, TLSInnerPlaintext.type
	header = []byte{23, 3, 3, 0, 0}
	binary.BigEndian.PutUint16(header[3:], uint16(len(plain)+16)) // + the GCM tag
	return plain, header
}

func newGCM(tb testing.TB) cipher.AEAD {
	key := make([]byte, 16) // AES-128
	rand.Read(key)
	block, err := aes.NewCipher(key)
	if err != nil {
		tb.Fatal(err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		tb.Fatal(err)
	}
	return aead
}

// A sealed record opens to what was sealed (so the benchmark measures
// real work).
func TestSealOpenRoundTrip(t *testing.T) {
	aead := newGCM(t)
	plain, hdr := tlsRecord(100)
	nonce := make([]byte, aead.NonceSize())
	sealed := aead.Seal(nil, nonce, plain, hdr)
	if len(sealed) != len(plain)+aead.Overhead() || int(binary.BigEndian.Uint16(hdr[3:])) != len(sealed) {
		t.Fatalf("sealed %d bytes, header says %d", len(sealed), binary.BigEndian.Uint16(hdr[3:]))
	}
	opened, err := aead.Open(nil, nonce, sealed, hdr)
	if err != nil || string(opened) != string(plain) {
		t.Fatalf("open: %v", err)
	}
}

// BenchmarkSealOpen: one op seals a record and opens it; b.SetBytes counts
// the payload once, so MB/s is payload echoed per second of cipher work.
func BenchmarkSealOpen(b *testing.B) {
	for _, size := range []int{64, 16 << 10} {
		b.Run(strconv.Itoa(size)+"B", func(b *testing.B) {
			aead := newGCM(b)
			plain, hdr := tlsRecord(size)
			nonce := make([]byte, aead.NonceSize())
			sealed := make([]byte, 0, len(plain)+aead.Overhead())
			opened := make([]byte, 0, len(plain))
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for i := uint64(0); b.Loop(); i++ {
				// A new nonce per record, as TLS derives one from the
				// record's sequence number.
				binary.BigEndian.PutUint64(nonce[len(nonce)-8:], i)
				sealed = aead.Seal(sealed[:0], nonce, plain, hdr)
				var err error
				if opened, err = aead.Open(opened[:0], nonce, sealed, hdr); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHandshakeCrypto: one op is the server's public-key work in a
// full handshake: an X25519 key pair and the shared secret with the
// client's share, and an ECDSA P-256 signature over a transcript hash.
func BenchmarkHandshakeCrypto(b *testing.B) {
	signer, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	client, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	transcript := sha256.Sum256([]byte("TLS 1.3, server CertificateVerify"))
	b.ReportAllocs()
	for b.Loop() {
		priv, err := ecdh.X25519().GenerateKey(rand.Reader)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := priv.ECDH(client.PublicKey()); err != nil {
			b.Fatal(err)
		}
		if _, err := ecdsa.SignASN1(rand.Reader, signer, transcript[:]); err != nil {
			b.Fatal(err)
		}
	}
}
