package tlshello_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"

	"github.com/veloq/veloq/tlshello"
)

// A TLS passthrough proxy reads the first bytes of each connection until
// they hold the ClientHello, picks a backend by the server name, and would
// then forward the bytes read, hello included, to that backend and splice
// the rest of the stream through without decrypting it.
func Example() {
	backends := map[string]string{
		"example.com":     "10.0.0.1:443",
		"api.example.com": "10.0.0.2:443",
	}
	pick := func(conn net.Conn) {
		defer conn.Close()
		hello, first, err := readHello(conn)
		switch {
		case errors.Is(err, tlshello.ErrNotTLS):
			fmt.Printf("not TLS: the %d bytes read go to the HTTP listener\n", len(first))
			return
		case err != nil:
			fmt.Println("drop:", err)
			return
		}
		// DNS names are case-insensitive; the hello has the name as sent.
		backend, ok := backends[strings.ToLower(hello.ServerName)]
		if !ok {
			backend = "10.0.0.9:443 (default)"
		}
		// Forward first, then splice the connection to the backend.
		fmt.Printf("%s %q -> %s\n", hello.ServerName, hello.ALPN, backend)
	}

	// A TLS client.
	pick(connect(func(c net.Conn) {
		_ = tls.Client(c, &tls.Config{ServerName: "API.example.com", NextProtos: []string{"h2", "http/1.1"}}).Handshake()
	}))

	// A client speaking plain HTTP to the TLS port.
	pick(connect(func(c net.Conn) {
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
	}))

	// Output:
	// API.example.com ["h2" "http/1.1"] -> 10.0.0.2:443
	// not TLS: the 37 bytes read go to the HTTP listener
}

// connect runs client on one end of a new pipe and returns the other end,
// the proxy's side of the connection.
func connect(client func(net.Conn)) net.Conn {
	c, proxy := net.Pipe()
	go func() {
		defer c.Close()
		client(c)
	}()
	return proxy
}

// readHello reads from conn until the bytes read hold a ClientHello or
// cannot start one, and returns them with the hello. It starts with a small
// buffer and grows it as Parse asks for more; Parse gives a final answer
// within tlshello.MaxLen bytes, so the buffer never grows past that.
func readHello(conn net.Conn) (*tlshello.ClientHello, []byte, error) {
	h := new(tlshello.ClientHello) // a proxy loop would reuse one
	buf := make([]byte, 0, 512)
	for {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, len(buf))
		}
		n, rerr := conn.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		err := h.Parse(buf)
		if err != tlshello.ErrNeedMore {
			return h, buf, err
		}
		if rerr != nil {
			return nil, buf, fmt.Errorf("connection ended inside the ClientHello: %w", rerr)
		}
	}
}
