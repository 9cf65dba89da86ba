package net

import (
	"errors"
	"io"
	"testing"
)

// OnDrain runs at once when output is already low, after sends bring a
// large output down, and when the connection closes with output stuck.
func TestOnDrain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		events := make(chan string, 4)
		wrote := make(chan struct{}, 2)
		h := &HandlerFuncs{Data: func(c *Conn) {
			p, _ := c.Next(-1)
			switch string(p) {
			case "idle":
				c.OnDrain(0, func() { events <- "drained at once" })
			case "big":
				c.Write(make([]byte, 8<<20)) // more than the socket buffers hold
				c.OnDrain(0, func() {
					if c.Closed() {
						events <- "released by close"
					} else {
						events <- "drained after sends"
					}
				})
				wrote <- struct{}{}
			}
		}}
		s := startServer(t, b, h, WithLoops(1))

		c := dial(t, s)
		c.Write([]byte("idle"))
		if got := await(t, events, "OnDrain with nothing pending never ran"); got != "drained at once" {
			t.Fatalf("got %q", got)
		}

		c2 := dial(t, s)
		c2.Write([]byte("big"))
		await(t, wrote, "the 8 MiB write never happened")
		select {
		case ev := <-events:
			t.Fatalf("%q before the client read 8 MiB", ev)
		default:
		}
		if _, err := io.ReadFull(c2, make([]byte, 8<<20)); err != nil {
			t.Fatal(err)
		}
		if got := await(t, events, "OnDrain never ran after the output was read"); got != "drained after sends" {
			t.Fatalf("got %q", got)
		}

		c3 := dial(t, s)
		c3.Write([]byte("big"))
		await(t, wrote, "the 8 MiB write never happened")
		c3.(interface{ SetLinger(int) error }).SetLinger(0)
		c3.Close() // reset: the output can never drain
		if got := await(t, events, "a waiter was stranded by a closed connection"); got != "released by close" {
			t.Fatalf("got %q", got)
		}
	})
}

// Abort drops pending output and reports its cause to OnClose.
func TestAbort(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		cause := errors.New("policy says no")
		closed := make(chan error, 1)
		h := &HandlerFuncs{
			Data: func(c *Conn) {
				c.Discard(c.Buffered())
				c.Write([]byte("never sent"))
				c.Abort(cause)
			},
			Close: func(c *Conn, err error) { closed <- err },
		}
		s := startServer(t, b, h)
		c := dial(t, s)
		c.Write([]byte("x"))
		if err := await(t, closed, "OnClose never ran after Abort"); !errors.Is(err, cause) {
			t.Fatalf("OnClose: %v, want the Abort cause", err)
		}
		n, _ := io.ReadAll(c)
		if len(n) != 0 {
			t.Fatalf("aborted connection sent %q", n)
		}
	})
}
