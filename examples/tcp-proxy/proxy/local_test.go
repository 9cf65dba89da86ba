//go:build linux

// Linux only: fills the descriptor table with Linux's SOCK_CLOEXEC sockets.

package proxy_test

import (
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/examples/tcp-proxy/proxy"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// When the proxy itself is out of descriptors, a client whose backend
// connection cannot even get a socket is closed without blaming the
// backend: no cooldown (the next clients still alternate over both
// backends), no dial failure counted, and the warnings are rate-limited.
func TestLocalEMFILEBlamesNoBackend(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		if b == vnet.BackendPortable {
			t.Skip("the portable backend holds a second descriptor per connection (net.FileConn's duplicate), so a descriptor table filled to its last few slots runs out where this test counts on room")
		}
		var addrs []string
		for i := range 2 {
			addrs = append(addrs, listen(t, func(c *net.TCPConn) { fmt.Fprint(c, i) }).String())
		}
		var logs logBuffer
		p, err := proxy.New(addrs, proxy.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
			proxy.WithCooldown(time.Hour))
		require.NoError(t, err)
		s := server(t, b, p, 1)
		port := s.Addr().(*net.TCPAddr).Port

		// Client sockets are made now: connecting them later needs no fd.
		const clients = 5
		var fds []int
		for range clients {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			require.NoError(t, err)
			fds = append(fds, fd)
		}
		t.Cleanup(func() {
			for _, fd := range fds {
				unix.Close(fd)
			}
		})

		// Fill the descriptor table, then free one: the proxy's accept gets
		// it, and its backend socket fails with EMFILE.
		var fillers []int
		release := func() {
			for _, fd := range fillers {
				unix.Close(fd)
			}
			fillers = nil
		}
		t.Cleanup(release)
		for {
			fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				require.ErrorIs(t, err, unix.EMFILE)
				break
			}
			fillers = append(fillers, fd)
		}
		unix.Close(fillers[len(fillers)-1])
		fillers = fillers[:len(fillers)-1]
		sa := &unix.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}}
		for _, fd := range fds {
			require.NoError(t, unix.Connect(fd, sa))
		}
		require.Eventually(t, func() bool { return p.Stats().LocalFailures >= 1 }, 20*time.Second, 5*time.Millisecond)
		release()

		st := p.Stats()
		assert.Zero(t, st.DialFailures, "a local EMFILE is no backend's failure")
		assert.LessOrEqual(t, strings.Count(logs.String(), "no socket for a backend connection"), 1)

		// Both backends are still in rotation.
		var got []string
		for range 4 {
			out, err := io.ReadAll(dial(t, s.Addr()))
			require.NoError(t, err)
			got = append(got, string(out))
		}
		g := strings.Join(got, "")
		assert.Contains(t, g, "0", "backend 0 in cooldown: %q", g)
		assert.Contains(t, g, "1", "backend 1 in cooldown: %q", g)
	})
}

// With -splice always and no descriptor left for a pipe, SpliceTo fails
// (pipe2: EMFILE) and each pair goes on by copy: every client gets its
// echo, and no pair is left neither served nor closed.
//
// Only pipe2 may fail, so clients go one at a time through a descriptor
// table with exactly three free slots: the proxy's accept, its backend
// socket and the echo server's accept take them, and pipe2, which needs
// two, fails whichever of the last two it races with. Client sockets are
// made before the table is filled (connecting needs no descriptor). The
// soft limit is lowered before the servers start, since io_uring's accept
// takes RLIMIT_NOFILE when the request is prepared, and it keeps filling
// the table quick.
func TestSpliceAlwaysCopiesWithoutPipes(t *testing.T) {
	const clients = 10
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		if b == vnet.BackendPortable {
			t.Skip("the portable backend holds a second descriptor per connection (net.FileConn's duplicate), so a descriptor table filled to its last few slots runs out where this test counts on room")
		}
		setFDLimit(t, uint64(backendtest.CountFDs(t)+256))
		echo := echoServer(t, b)
		p, s := startProxy(t, b, []string{echo.Addr().String()}, proxy.WithSplice(proxy.SpliceAlways))
		fds := rawClients(t, clients)
		release := fillFDTable(t, 3)
		sa := &unix.SockaddrInet4{Port: s.Addr().(*net.TCPAddr).Port, Addr: [4]byte{127, 0, 0, 1}}
		for i, fd := range fds {
			require.NoError(t, unix.Connect(fd, sa), "client %d", i)
			msg := fmt.Sprintf("client %d", i)
			got, err := rawExchange(fd, []byte(msg))
			require.NoError(t, err, "client %d: the pair hung after %q (neither served nor closed)", i, got)
			require.Equal(t, msg, string(got), "client %d", i)
			// Its three descriptors are free again before the next client.
			eventually(t, "the pair closed", func() bool {
				return p.Stats().Active == 0 && s.NumConns() == 0 && echo.NumConns() == 0
			})
		}
		release()
		var spliced uint64
		for _, st := range s.Stats() {
			spliced += st.Spliced
		}
		require.Zero(t, spliced, "a pipe was had: the test did not starve pipe2")
		st := p.Stats()
		require.Equal(t, uint64(clients), st.Connected)
		require.Zero(t, st.LocalFailures)
	})
}

// setFDLimit sets the soft RLIMIT_NOFILE to n for the rest of the test. The
// limit is the process's: no test of this package runs in parallel.
func setFDLimit(t *testing.T, n uint64) {
	t.Helper()
	var old unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &old))
	if old.Max < n {
		t.Skipf("needs a descriptor limit of %d; the hard limit is %d", n, old.Max)
	}
	lim := old
	lim.Cur = n
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &lim))
	t.Cleanup(func() { unix.Setrlimit(unix.RLIMIT_NOFILE, &old) })
}

// fillFDTable opens /dev/null until the descriptor table is full, then
// closes leave of them, so that exactly leave descriptors can be opened
// until release (at the latest when the test ends).
func fillFDTable(t *testing.T, leave int) (release func()) {
	t.Helper()
	var fillers []int
	release = func() {
		for _, fd := range fillers {
			unix.Close(fd)
		}
		fillers = nil
	}
	t.Cleanup(release)
	for {
		fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			require.ErrorIs(t, err, unix.EMFILE)
			break
		}
		fillers = append(fillers, fd)
	}
	for range leave {
		unix.Close(fillers[len(fillers)-1])
		fillers = fillers[:len(fillers)-1]
	}
	return release
}

// rawClients makes n blocking TCP sockets with 10 s receive and send
// timeouts (a hang shows as EAGAIN), closed when the test ends.
func rawClients(t *testing.T, n int) []int {
	t.Helper()
	tv := unix.Timeval{Sec: 10}
	var fds []int
	for range n {
		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		require.NoError(t, err)
		t.Cleanup(func() { unix.Close(fd) })
		require.NoError(t, unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv))
		require.NoError(t, unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv))
		fds = append(fds, fd)
	}
	return fds
}

// rawExchange sends msg on fd, half-closes, and reads until EOF.
func rawExchange(fd int, msg []byte) ([]byte, error) {
	if _, err := unix.Write(fd, msg); err != nil {
		return nil, fmt.Errorf("write: %w", err)
	}
	if err := unix.Shutdown(fd, unix.SHUT_WR); err != nil {
		return nil, fmt.Errorf("shutdown: %w", err)
	}
	var got []byte
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, buf)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return got, fmt.Errorf("read: %w", err)
		case n == 0:
			return got, nil
		}
		got = append(got, buf[:n]...)
	}
}
