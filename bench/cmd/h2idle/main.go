// Command h2idle measures what an idle HTTP/2 connection costs a server:
// it opens -n connections (h2c with prior knowledge, or h2 over TLS with
// -tls), makes one GET / on each, keeps them open for -hold, and prints
// the server's RSS growth per connection, read from /proc/-pid/status
// before the first connection and at the end of the hold.
//
//	h2idle -addr 127.0.0.1:8080 -pid 1234 -n 10000 -hold 3s [-tls [-curve x25519]]
//
// Over TLS the client offers Go's default key shares, which include the
// post-quantum hybrid X25519MLKEM768, as browsers now do: its ClientHello
// is about 1.5 KB, and crypto/tls servers keep buffers of that size for
// the connection's life. -curve x25519 offers X25519 alone (a ClientHello
// of about 300 bytes), as bench/cmd/tcpload does for bench/tls.sh's
// HTTPS/1.1 figures.
//
// Loopback only; it stops by itself after the hold.
package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"time"

	"golang.org/x/net/http2/hpack"

	"github.com/veloq/veloq/bench/internal/proc"
)

const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

func main() {
	addr := flag.String("addr", "127.0.0.1:8080", "server address (loopback)")
	pid := flag.Int("pid", 0, "the server's process id, for its RSS")
	n := flag.Int("n", 1000, "connections")
	hold := flag.Duration("hold", 3*time.Second, "how long to keep them open")
	useTLS := flag.Bool("tls", false, "h2 over TLS (ALPN) instead of h2c")
	curve := flag.String("curve", "default", "with -tls, the key shares offered: default (Go's, X25519MLKEM768 first) or x25519")
	flag.Parse()
	if host, _, err := net.SplitHostPort(*addr); err != nil || !net.ParseIP(host).IsLoopback() {
		log.Fatalf("h2idle: %q is not a loopback address", *addr)
	}
	if *pid == 0 {
		log.Fatal("h2idle: -pid is required")
	}
	var curves []tls.CurveID
	switch *curve {
	case "default":
	case "x25519":
		curves = []tls.CurveID{tls.X25519}
	default:
		log.Fatalf("h2idle: -curve %q: want default or x25519", *curve)
	}
	var block bytes.Buffer
	enc := hpack.NewEncoder(&block)
	scheme := "http"
	if *useTLS {
		scheme = "https"
	}
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", scheme}, {":path", "/"}, {":authority", "localhost"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	// preface, empty SETTINGS, HEADERS(stream 1, END_STREAM|END_HEADERS).
	req := append([]byte(preface), 0, 0, 0, 4, 0, 0, 0, 0, 0)
	req = append(req, byte(block.Len()>>16), byte(block.Len()>>8), byte(block.Len()), 1, 5, 0, 0, 0, 1)
	req = append(req, block.Bytes()...)

	before := rss(*pid)
	conns := make([]net.Conn, 0, *n)
	for i := 0; i < *n; i++ {
		c, err := net.Dial("tcp", *addr)
		if err != nil {
			log.Fatalf("h2idle: connection %d: %v", i, err)
		}
		if *useTLS {
			tc := tls.Client(c, &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2"}, CurvePreferences: curves})
			if err := tc.Handshake(); err != nil {
				log.Fatalf("h2idle: handshake %d: %v", i, err)
			}
			if p := tc.ConnectionState().NegotiatedProtocol; p != "h2" {
				log.Fatalf("h2idle: ALPN gave %q, not h2", p)
			}
			c = tc
		}
		if _, err := c.Write(req); err != nil {
			log.Fatal(err)
		}
		if err := readResponse(c); err != nil {
			log.Fatalf("h2idle: connection %d: %v", i, err)
		}
		conns = append(conns, c)
	}
	time.Sleep(*hold)
	after := rss(*pid)
	out, _ := json.Marshal(map[string]any{"conns": *n, "rss_before": before, "rss_after": after,
		"bytes_per_conn": float64(after-before) / float64(*n)})
	fmt.Println(string(out))
	for _, c := range conns {
		c.Close()
	}
}

// readResponse reads frames until one on stream 1 ends it (END_STREAM).
func readResponse(c net.Conn) error {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	defer c.SetReadDeadline(time.Time{})
	var hdr [9]byte
	for {
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			return err
		}
		length := int(hdr[0])<<16 | int(hdr[1])<<8 | int(hdr[2])
		typ, flags := hdr[3], hdr[4]
		stream := uint32(hdr[5]&0x7f)<<24 | uint32(hdr[6])<<16 | uint32(hdr[7])<<8 | uint32(hdr[8])
		if _, err := io.CopyN(io.Discard, c, int64(length)); err != nil {
			return err
		}
		if typ == 7 {
			return fmt.Errorf("GOAWAY")
		}
		if stream == 1 && (typ == 0 || typ == 1) && flags&1 != 0 {
			return nil
		}
	}
}

func rss(pid int) int64 {
	kib, err := proc.RSSKiB(pid)
	if err != nil {
		log.Fatal(err)
	}
	return kib << 10
}
