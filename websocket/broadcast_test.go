package websocket

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

func TestPreparedMessageFrame(t *testing.T) {
	pm, err := NewPreparedMessage(TextMessage, []byte("hi"))
	require.NoError(t, err)
	assert.Equal(t, []byte{0x81, 0x02, 'h', 'i'}, pm.Frame())
	_, err = NewPreparedMessage(MessageType(OpPing), nil)
	assert.Error(t, err)
}

// A Group spread over two loops: members added in OnOpen, removed in
// OnClose; a broadcast from a plain goroutine reaches every member once,
// in order, and a member that left gets nothing.
func TestGroupBroadcastAcrossLoops(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		g := NewGroup()
		var mu sync.Mutex
		loops := map[*vnet.Loop]bool{}
		h := &HandlerFuncs{
			Open: func(c *Conn) {
				g.Add(c)
				mu.Lock()
				loops[c.Loop()] = true
				mu.Unlock()
			},
			Close: func(c *Conn, err error) { g.Remove(c) },
		}
		srv, _ := startWS(t, b, h)
		const n = 12
		clients := make([]*wsClient, n)
		for i := range clients {
			clients[i] = dialWS(t, srv.Addr().String())
		}
		require.Eventually(t, func() bool { return g.Len() == n }, 5*time.Second, time.Millisecond)
		mu.Lock()
		nloops := len(loops)
		mu.Unlock()
		require.Equal(t, 2, nloops, "members on both loops (reuseport spreads the connections)")

		// One client leaves; the group shrinks when its OnClose ran.
		clients[0].send(OpClose, true, closePayload(1000, ""))
		clients[0].expectClose(StatusNormalClosure)
		require.Eventually(t, func() bool { return g.Len() == n-1 }, 5*time.Second, time.Millisecond)

		for i := range 3 {
			require.NoError(t, g.Broadcast(TextMessage, []byte(fmt.Sprintf("news %d", i))))
		}
		for _, c := range clients[1:] {
			for i := range 3 {
				f := c.mustRead()
				require.Equal(t, OpText, f.op)
				require.Equal(t, fmt.Sprintf("news %d", i), string(f.payload))
			}
		}
		require.Eventually(t, func() bool { return g.Stats().Sent == 3*(n-1) }, 5*time.Second, time.Millisecond)
		assert.Zero(t, g.Stats().Skipped)
	})
}

// Broadcast over a plain slice, and AsyncWrite from other goroutines.
func TestBroadcastAndAsyncWrite(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		ev := &events{}
		srv, _ := startWS(t, b, echoHandler(ev))
		const n = 6
		clients := make([]*wsClient, n)
		for i := range clients {
			clients[i] = dialWS(t, srv.Addr().String())
		}
		require.Eventually(t, func() bool { return ev.openCount() == n }, 5*time.Second, time.Millisecond)
		ev.mu.Lock()
		conns := append([]*Conn(nil), ev.conns...)
		ev.mu.Unlock()

		require.NoError(t, Broadcast(conns, BinaryMessage, []byte{1, 2, 3}))
		for _, c := range clients {
			f := c.mustRead()
			require.Equal(t, OpBinary, f.op)
			require.Equal(t, []byte{1, 2, 3}, f.payload)
		}

		// AsyncWrite from many goroutines: every message arrives, and each
		// goroutine's messages keep their order.
		var wg sync.WaitGroup
		done := make(chan error, n*10)
		for gi := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range 5 {
					for _, c := range conns {
						msg := []byte(fmt.Sprintf("g%d-%d", gi, i))
						assert.NoError(t, c.AsyncWrite(TextMessage, msg, func(err error) { done <- err }))
					}
				}
			}()
		}
		wg.Wait()
		for range 2 * 5 * n {
			require.NoError(t, <-done)
		}
		for _, c := range clients {
			next := [2]int{}
			for range 10 {
				f := c.mustRead()
				var gi, i int
				_, err := fmt.Sscanf(string(f.payload), "g%d-%d", &gi, &i)
				require.NoError(t, err)
				require.Equal(t, next[gi], i, "goroutine %d's order", gi)
				next[gi]++
			}
		}
	})
}

// A member that does not read is skipped once its pending output is over
// the limit; the others keep getting the broadcast.
func TestBroadcastSkipsSlowReader(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		g := NewGroup()
		h := &HandlerFuncs{Open: func(c *Conn) { g.Add(c) }, Close: func(c *Conn, err error) { g.Remove(c) }}
		payload := make([]byte, 32<<10)
		// Room for three messages, not two: the fast member may still
		// have its last message counted as pending when the next
		// broadcast comes. Where the loop writes to the socket itself
		// (uring, epoll, portable on unix) a write the kernel takes is
		// acknowledged before the loop runs more user code; on Windows
		// every write goes through the connection's writer goroutine,
		// and its completion reaches the loop only after the peer may
		// already have read the bytes. Under Wine, with the limit at two
		// messages, a trace showed the fast member skipped with
		// OutputBuffered 32772 while its writer's Write had not yet
		// returned (it did 0.1-0.4 ms later), and the test then waited
		// 10 s for a message that was never queued (3 runs of 20).
		srv, _ := startWS(t, b, h, WithMaxPendingOutput(3*len(payload)))
		slow := dialWS(t, srv.Addr().String()) // never reads
		fast := dialWS(t, srv.Addr().String())
		require.Eventually(t, func() bool { return g.Len() == 2 }, 5*time.Second, time.Millisecond)
		// Broadcast until the slow member's kernel buffers and our limit
		// are full; the fast one reads everything. Bounded: the kernel's
		// loopback buffers hold a few MiB at most.
		for i := 0; i < 2000 && g.Stats().Skipped == 0; i++ {
			require.NoError(t, g.Broadcast(BinaryMessage, payload))
			f := fast.mustRead()
			require.Len(t, f.payload, len(payload))
		}
		require.NotZero(t, g.Stats().Skipped, "the slow reader was never skipped")
		// The fast reader still gets what follows.
		require.NoError(t, g.Broadcast(TextMessage, []byte("last")))
		f := fast.mustRead()
		require.Equal(t, "last", string(f.payload))
		// The slow member was skipped, not disconnected: what was queued
		// for it is still there to read.
		require.Len(t, slow.mustRead().payload, len(payload))
	})
}

// CloseAll sends every member a close frame; members that answer are
// closed and leave the group.
func TestGroupCloseAll(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		g := NewGroup()
		h := &HandlerFuncs{Open: g.Add, Close: func(c *Conn, err error) { g.Remove(c) }}
		srv, _ := startWS(t, b, h)
		clients := make([]*wsClient, 4)
		for i := range clients {
			clients[i] = dialWS(t, srv.Addr().String())
		}
		require.Eventually(t, func() bool { return g.Len() == len(clients) }, 5*time.Second, time.Millisecond)
		require.ErrorIs(t, g.CloseAll(1005, ""), ErrInvalidCloseCode)
		require.NoError(t, g.CloseAll(StatusGoingAway, "restarting"))
		for _, c := range clients {
			f := c.mustRead()
			require.Equal(t, OpClose, f.op)
			require.Equal(t, StatusGoingAway, f.code)
			require.Equal(t, "restarting", f.reason)
			c.send(OpClose, true, closePayload(uint16(StatusGoingAway), ""))
			c.expectEOF()
		}
		require.Eventually(t, func() bool { return g.Len() == 0 }, 5*time.Second, time.Millisecond)
	})
}
