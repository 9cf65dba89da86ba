// Package upstreamtest serves a fixed HTTP/1.1 answer from a veloq loop,
// an upstream for the client's and the proxy's benchmarks and allocation
// tests: it allocates nothing per request, so what a run allocates is
// the code under test's.
package upstreamtest

import (
	"bytes"
	"testing"

	vnet "github.com/veloq/veloq/net"
)

// Fixed listens on 127.0.0.1 with one loop of backend be and answers
// every request head it reads ("\r\n\r\n"; bodies are not expected) with
// resp, pipelined heads in order. It stops when tb ends and returns the
// address.
func Fixed(tb testing.TB, be vnet.Backend, resp []byte) string {
	tb.Helper()
	end := []byte("\r\n\r\n")
	h := &vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
		in, _ := c.Peek(0)
		for {
			i := bytes.Index(in, end)
			if i < 0 {
				return
			}
			c.Discard(i + 4)
			in = in[i+4:]
			c.Write(resp)
		}
	}}
	s, err := vnet.Listen("tcp", "127.0.0.1:0", h, vnet.WithBackend(be), vnet.WithLoops(1))
	if err != nil {
		tb.Fatalf("upstreamtest: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s.Addr().String()
}
