//go:build linux

// Linux only: reads the kernel's TCP state (TCP_INFO).

package websocket

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// The close orders the clients of TestCloseEndsWithoutReset follow.
const (
	closeServerFirst = iota // the server starts; the client answers, then waits for EOF
	closeThenData           // the client starts, then sends a message after its close
	closeTwice              // the client starts, then answers the server's echo with a close of its own
	closeOrders
)

// Every way a close handshake can go ends in the server's FIN, never a
// reset: the server half-closes after the close frames and discards what
// still arrives until the peer's FIN (RFC 6455 §7.1.1, §5.5.1). Before,
// it closed the socket at once, and the bytes the client sent after the
// server's close frame (its answer to it, or data after its own close)
// made the kernel answer with RST: 108–152 closes in 1,000 on each
// backend, a reset the client may see instead of the close frame.
//
// Each client ends by half-closing too; once its socket is CLOSED it must
// have seen no reset: no error on any read or write and none pending
// (SO_ERROR), which is where the reset shows when the server's FIN came
// first.
func TestCloseEndsWithoutReset(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		ev := &events{}
		srv, u := startWS(t, b, echoHandler(ev))
		const clients = 200
		conns := make([]*wsClient, clients)
		for i := range conns {
			conns[i] = dialWS(t, srv.Addr().String())
		}
		var wg sync.WaitGroup
		for i, c := range conns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				assert.NoError(t, closeExchange(c, i%closeOrders), "client %d (order %d)", i, i%closeOrders)
			}()
		}
		wg.Wait()
		require.False(t, t.Failed())
		for i, c := range conns {
			require.Eventually(t, func() bool { return tcpState(t, c.conn) == unix.BPF_TCP_CLOSE }, 5*time.Second, time.Millisecond,
				"client %d: the server never answered its FIN", i)
			require.NoError(t, sockError(t, c.conn), "client %d (order %d): the server reset the connection", i, i%closeOrders)
		}
		require.Eventually(t, func() bool { return len(ev.closeErrs()) == clients }, 5*time.Second, time.Millisecond)
		for _, err := range ev.closeErrs() {
			var ce *CloseError
			if err != nil && !errors.As(err, &ce) {
				t.Fatalf("OnClose(%v): the handshake completed", err)
			}
		}
		serverFirst := uint64(clients+closeOrders-1) / closeOrders // i%closeOrders == closeServerFirst
		assert.Equal(t, Stats{Upgrades: clients, ClosedLocally: serverFirst, ClosedByPeer: clients - serverFirst}, u.Stats())
	})
}

// closeExchange runs one close handshake in the given order and reads
// until the server's FIN, then half-closes.
func closeExchange(c *wsClient, order int) error {
	write := func(op Opcode, p []byte) error {
		_, err := c.conn.Write(mustMasked(op, true, 0, p))
		return err
	}
	awaitClose := func() error {
		for {
			f, err := c.read()
			if err != nil {
				return fmt.Errorf("waiting for the close frame: %w", err)
			}
			if f.op == OpClose {
				return nil
			}
		}
	}
	var err error
	switch order {
	case closeServerFirst:
		err = errors.Join(write(OpText, []byte("close-me")), awaitClose(), write(OpClose, closePayload(1001, "")))
	case closeThenData:
		err = errors.Join(write(OpClose, closePayload(1000, "")), write(OpText, []byte("late")), awaitClose())
	case closeTwice:
		err = errors.Join(write(OpClose, closePayload(1000, "")), awaitClose(), write(OpClose, closePayload(1000, "")))
	}
	if err != nil {
		return err
	}
	if f, err := c.read(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("after the close frame: got %+v, %v; want EOF", f, err)
	}
	return c.conn.(*net.TCPConn).CloseWrite()
}

// A client that gets the server's FIN and never closes its side is closed
// after the close handshake timeout, not before: the linger is bounded, and
// real.
func TestCloseLingerIsBounded(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		const timeout = 300 * time.Millisecond
		closed := make(chan time.Time, 1)
		srv, _ := startWS(t, b, &HandlerFuncs{Close: func(*Conn, error) { closed <- time.Now() }}, WithCloseHandshakeTimeout(timeout))
		c := dialWS(t, srv.Addr().String())
		start := time.Now()
		c.send(OpClose, true, closePayload(1000, ""))
		require.Equal(t, OpClose, c.mustRead().op)
		_, err := c.read()
		require.ErrorIs(t, err, io.EOF, "the server's FIN") // and the client keeps its side open
		var at time.Time
		require.Eventually(t, func() bool {
			select {
			case at = <-closed:
				return true
			default:
				return false
			}
		}, 5*time.Second, time.Millisecond)
		require.GreaterOrEqual(t, at.Sub(start), timeout, "the server closed before the client's FIN or the timeout")
	})
}

// tcpState returns the TCP state of c's socket (unix.BPF_TCP_*).
func tcpState(t *testing.T, c net.Conn) uint8 {
	var info *unix.TCPInfo
	control(t, c, func(fd int) (err error) {
		info, err = unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
		return err
	})
	return info.State
}

// sockError returns the error pending on c's socket (SO_ERROR).
func sockError(t *testing.T, c net.Conn) error {
	var soerr int
	control(t, c, func(fd int) (err error) {
		soerr, err = unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		return err
	})
	if soerr != 0 {
		return unix.Errno(soerr)
	}
	return nil
}

func control(t *testing.T, c net.Conn, f func(fd int) error) {
	rc, err := c.(*net.TCPConn).SyscallConn()
	require.NoError(t, err)
	var ferr error
	require.NoError(t, rc.Control(func(fd uintptr) { ferr = f(int(fd)) }))
	require.NoError(t, ferr)
}
