//go:build linux

// Linux only: tests the io_uring and epoll backends' internals.

package net

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// A connection its handler pauses in OnOpen (a proxy, while it connects
// to the backend) has taken no input yet, so the pause holds nothing back:
// once resumed, it receives like any other connection. On io_uring it
// used to be marked paced by that pause, which kept it on one-shot
// receives for good: a recv submission per message (tcp-proxy's client
// connections, one per request).
func TestOpenPauseDoesNotPace(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		conns := make(chan *Conn, 1)
		h := &HandlerFuncs{
			Open: func(c *Conn) {
				c.PauseRead()
				conns <- c
			},
			Data: func(c *Conn) {
				p, _ := c.Next(-1)
				c.Write(p)
			},
		}
		s := startServer(t, b, h, WithLoops(1))
		cl := dial(t, s)
		c := await(t, conns, "no connection")
		require.NoError(t, c.Loop().Post(c.ResumeRead))
		buf := make([]byte, 100)
		for range 2 * shortsToMultishot {
			_, err := cl.Write(buf)
			require.NoError(t, err)
			_, err = io.ReadFull(cl, buf)
			require.NoError(t, err)
		}
		if b != BackendUring {
			return // epoll reads one buffer at a time whatever the pauses
		}
		mode := make(chan recvMode, 1)
		require.NoError(t, c.Loop().Post(func() {
			mode <- c.loop.be.(*uringBackend).conns.at(c.slot).mode
		}))
		require.Equal(t, recvMultishot, await(t, mode, "posted function did not run"),
			"a connection paused only in OnOpen still receives one buffer at a time after %d short messages", 2*shortsToMultishot)
	})
}
