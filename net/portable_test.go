//go:build unix

package net

import (
	"io"
	"net"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// An idle connection on the portable backend holds no read buffer and one
// goroutine, its watcher: the loop reads every connection's input into
// its own buffer, and the writer starts only once a socket is full. A
// reader goroutine per connection held its 16 KiB buffer, and a writer
// goroutine, for the connection's whole life.
func TestPortableIdleConnHoldsNoBuffer(t *testing.T) {
	const n = 200
	s := startServer(t, BackendPortable, echoHandler(), WithLoops(1))
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	goroutines := runtime.NumGoroutine()
	conns := make([]net.Conn, n)
	buf := make([]byte, 4)
	for i := range conns {
		conns[i] = dial(t, s)
		_, err := conns[i].Write([]byte("ping"))
		require.NoError(t, err)
		_, err = io.ReadFull(conns[i], buf)
		require.NoError(t, err)
		require.Equal(t, "ping", string(buf))
	}
	// Each connection answered, so its watcher runs; nothing else starts
	// while it is idle.
	require.LessOrEqual(t, runtime.NumGoroutine()-goroutines, n, "goroutines for %d idle connections", n)
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	// Both ends of each connection are in this process: the client's
	// net.Conn and the server's Conn, records and net's duplicate, under
	// 3 KiB together (measured), where the reader's buffer alone was 16.
	perConn := (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
	require.Less(t, perConn, int64(8<<10), "heap bytes per idle connection")
}

// A portable server gets no spare P: its loop waits in the Go scheduler,
// without holding one, and a spare P only moved its helpers' wake-ups to
// another thread. NewServer raises GOMAXPROCS for the other backends.
func TestPortableNoSpareP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	s := startServer(t, BackendPortable, echoHandler(), WithLoops(1))
	require.Equal(t, 1, runtime.GOMAXPROCS(0))
	// And it serves on the one P.
	c := dial(t, s)
	_, err := c.Write([]byte("ping"))
	require.NoError(t, err)
	buf := make([]byte, 4)
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	require.Equal(t, "ping", string(buf))
}
