package backendtest

import (
	"net"
	"sync"
	"testing"
)

// ServeTCP listens on 127.0.0.1 with the standard library and runs serve
// on a goroutine for each connection, with its index (0 for the first),
// closing the connection when serve returns: a hand-written peer (an
// upstream that misbehaves on purpose). It returns the address; the
// listener and every connection are closed, and their goroutines waited
// for, at the end of the test.
func ServeTCP(t testing.TB, serve func(c net.Conn, i int)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c, i)
			}()
		}
	}()
	return ln.Addr().String()
}
