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
