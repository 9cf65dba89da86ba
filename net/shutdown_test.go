package net

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// goodbyeHandler echoes; on shutdown it says "bye" and closes, except for
// connections that sent "stay", which it leaves open.
type goodbyeHandler struct {
	HandlerFuncs
	told atomic.Int32
}

func (h *goodbyeHandler) OnShutdown(c *Conn) {
	h.told.Add(1)
	if c.Value() == "stay" {
		return
	}
	c.Write([]byte("bye"))
	c.Close()
}

func newGoodbyeHandler() *goodbyeHandler {
	h := &goodbyeHandler{}
	h.Data = func(c *Conn) {
		b, _ := c.Next(-1)
		if string(b) == "stay" {
			c.SetValue("stay")
		}
		c.Write(b)
	}
	return h
}

func sumStats(s *Server) (drained, cut uint64) {
	for _, st := range s.Stats() {
		drained += st.Drained
		cut += st.Cut
	}
	return
}

// Shutdown calls OnShutdown on every open connection, which ends it its
// own way; they count as drained.
func TestShutdownCallsOnShutdown(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		h := newGoodbyeHandler()
		s, err := Listen("tcp", "127.0.0.1:0", h, WithBackend(b), WithLoops(2), WithLogger(testLogger(t)))
		require.NoError(t, err)
		const n = 4
		clients := make([]io.ReadWriter, n)
		for i := range clients {
			c := dial(t, s)
			_, err := c.Write([]byte("hi"))
			require.NoError(t, err)
			got, err := readFull(c, 2)
			require.NoError(t, err)
			require.Equal(t, "hi", string(got))
			clients[i] = c
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		require.NoError(t, s.Shutdown(ctx))
		for _, c := range clients {
			got, err := io.ReadAll(c)
			require.NoError(t, err)
			require.Equal(t, "bye", string(got))
		}
		require.EqualValues(t, n, h.told.Load())
		drained, cut := sumStats(s)
		require.EqualValues(t, n, drained)
		require.Zero(t, cut)
	})
}

// The drain timeout (Shutdown's context) cuts a connection that does not
// end, and counts it apart from those that ended in time.
func TestShutdownCutsAtDeadline(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		h := newGoodbyeHandler()
		s, err := Listen("tcp", "127.0.0.1:0", h, WithBackend(b), WithLoops(1), WithLogger(testLogger(t)))
		require.NoError(t, err)
		leaving, staying := dial(t, s), dial(t, s)
		for _, m := range []struct {
			c   io.ReadWriter
			msg string
		}{{leaving, "go"}, {staying, "stay"}} {
			_, err := m.c.Write([]byte(m.msg))
			require.NoError(t, err)
			_, err = readFull(m.c, len(m.msg))
			require.NoError(t, err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- s.Shutdown(ctx) }()
		got, err := io.ReadAll(leaving)
		require.NoError(t, err)
		require.Equal(t, "bye", string(got))
		require.Eventually(t, func() bool { d, _ := sumStats(s); return d == 1 }, 10*time.Second, time.Millisecond)
		select {
		case err := <-done:
			t.Fatalf("Shutdown returned %v with a connection open", err)
		default:
		}
		cancel() // the drain timeout
		require.True(t, errors.Is(await(t, done, "Shutdown did not return"), context.Canceled))
		_, err = io.ReadAll(staying)
		_ = err // EOF or a reset: either way it ended
		drained, cut := sumStats(s)
		require.EqualValues(t, 1, drained)
		require.EqualValues(t, 1, cut)
		require.EqualValues(t, 2, h.told.Load())
	})
}

// halfCloser half-closes on shutdown: it has said all it will, and waits
// only for the peer's FIN.
type halfCloser struct{ HandlerFuncs }

func (halfCloser) OnShutdown(c *Conn) { c.CloseWrite() }

// NumNotified counts the told connections until their handler ends them,
// by Close or CloseWrite: a protocol server's Shutdown need not wait for
// a peer's FIN after the handler's last word.
func TestNumNotified(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		h := newGoodbyeHandler()
		s, err := Listen("tcp", "127.0.0.1:0", h, WithBackend(b), WithLoops(1), WithLogger(testLogger(t)))
		require.NoError(t, err)
		hc := &halfCloser{HandlerFuncs{Data: func(c *Conn) { c.Next(-1); c.CloseWrite() }}}
		s2, err := Listen("tcp", "127.0.0.1:0", hc, WithBackend(b), WithLoops(1), WithLogger(testLogger(t)))
		require.NoError(t, err)
		t.Cleanup(func() { s.Close(); s2.Close() })
		stays, half := dial(t, s), dial(t, s2)
		_, err = stays.Write([]byte("stay"))
		require.NoError(t, err)
		_, err = readFull(stays, 4)
		require.NoError(t, err)
		early := dial(t, s2) // half-closed by its handler before the shutdown
		_, err = early.Write([]byte("x"))
		require.NoError(t, err)
		_, err = io.ReadAll(early)
		require.NoError(t, err)
		waitConns(t, s2, 2)

		s.NotifyShutdown()
		s2.NotifyShutdown()
		require.Equal(t, 1, s.NumNotified(), "told, left open by its handler")
		require.Equal(t, 0, s2.NumNotified(), "half-closed by its handler")
		require.Equal(t, 2, s2.NumConns(), "still open for the peers' FIN")
		_, err = io.ReadAll(half) // the server's FIN
		require.NoError(t, err)
	})
}
