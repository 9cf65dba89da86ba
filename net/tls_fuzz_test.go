package net

import (
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"
)

// chunkConn writes what a TLS client sends in the chunk sizes a fuzzer
// chose, and can flip one byte of it, so the server's record path meets
// arbitrary splits and corrupted records.
type chunkConn struct {
	net.Conn
	sizes   []byte
	next    int
	flipAt  int // byte offset to corrupt once armed; <0: none
	armed   bool
	flipped bool
	sent    int
}

func (c *chunkConn) Write(p []byte) (int, error) {
	if !c.armed {
		return c.Conn.Write(p)
	}
	q := append([]byte(nil), p...)
	if i := c.flipAt - c.sent; c.flipAt >= 0 && i >= 0 && i < len(q) {
		q[i] ^= 0x5a
		c.flipped = true
	}
	for off := 0; off < len(q); {
		n := 1 + int(c.sizes[c.next%len(c.sizes)])
		c.next++
		n = min(n, len(q)-off)
		if _, err := c.Conn.Write(q[off : off+n]); err != nil {
			return off, err
		}
		off += n
	}
	c.sent += len(p)
	return len(p), nil
}

var fuzzTLSServer struct {
	once sync.Once
	addr string
}

// FuzzTLSRecords sends a message over a fresh TLS connection to a TLS
// echo, its records split in the fuzzer's chunk sizes, and maybe one byte
// corrupted: an intact stream comes back whole; a corrupted one ends the
// connection (crypto/tls's alert and a close), never a hang, a panic or
// bytes that were not sent.
func FuzzTLSRecords(f *testing.F) {
	f.Add([]byte("hello"), []byte{0}, -1)
	f.Add(bytes.Repeat([]byte("x"), 30000), []byte{3, 200, 17, 255}, -1)
	f.Add([]byte("corrupt me"), []byte{1}, 8)
	f.Add([]byte("a"), []byte{255}, 0)
	f.Fuzz(func(t *testing.T, msg, sizes []byte, flipAt int) {
		if len(msg) == 0 || len(sizes) == 0 || len(msg) > 32<<10 {
			return // larger messages in one-byte writes take seconds an exec
		}
		fuzzTLSServer.once.Do(func() {
			s, err := Listen("tcp", "127.0.0.1:0", echoHandler(), WithLoops(1), WithTLS(testCert().ServerConfig()),
				WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			if err != nil {
				panic(err)
			}
			fuzzTLSServer.addr = s.Addr().String() // kept for the whole run
		})
		raw, err := net.Dial("tcp", fuzzTLSServer.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		raw.SetDeadline(time.Now().Add(10 * time.Second))
		cc := &chunkConn{Conn: raw, sizes: sizes, flipAt: flipAt}
		c := tls.Client(cc, testCert().ClientConfig("localhost"))
		if err := c.Handshake(); err != nil {
			t.Fatal(err)
		}
		cc.armed = true
		werr := make(chan error, 1)
		go func() {
			_, err := c.Write(msg)
			// The FIN ends a record the flip made longer than what was
			// sent, instead of leaving the server waiting for the rest.
			raw.(*net.TCPConn).CloseWrite()
			werr <- err
		}()
		got := make([]byte, len(msg))
		n, err := io.ReadFull(c, got)
		raw.Close()
		werrv := <-werr
		switch {
		case !cc.flipped && err != nil:
			t.Fatalf("echo of %d bytes: %v after %d (write: %v)", len(msg), err, n, werrv)
		case cc.flipped && err == nil:
			// A flip that crypto/tls did not reject would be a forgery.
			t.Fatalf("a corrupted stream was echoed whole")
		}
		if !bytes.Equal(got[:n], msg[:n]) {
			t.Fatalf("echo differs from what was sent")
		}
	})
}
