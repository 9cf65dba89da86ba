package net

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestRedeliver: a handler that leaves its input unconsumed while it is
// busy elsewhere gets the same bytes again when it calls Redeliver, with
// no new byte from the peer (without it, OnData would wait for more input
// and the read below would time out).
func TestRedeliver(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		busy := true
		h := &HandlerFuncs{Data: func(c *Conn) {
			if busy {
				busy = false // take nothing now; come back for it later
				c.AfterFunc(10*time.Millisecond, func() {
					c.Redeliver()
					c.Redeliver() // a second call while one is pending is harmless
				})
				return
			}
			p, _ := c.Next(-1)
			c.Write(p)
		}}
		s := startServer(t, b, h, WithLoops(1))
		conn := dial(t, s)
		_, err := io.WriteString(conn, "hello")
		require.NoError(t, err)
		got, err := readFull(conn, 5)
		require.NoError(t, err)
		require.Equal(t, "hello", string(got))
	})
}
