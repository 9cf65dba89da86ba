package http

import (
	"errors"
	"net"
	"os"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// An inherited socket is served by vhttp (and so by WebSocket servers),
// and ListenerFiles hands it on.
func TestListenFiles(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		if runtime.GOOS == "windows" {
			s := newServer(t, HandlerFunc(testHandler), WithNetOptions(vnet.WithBackend(b)))
			_, err := s.ListenFiles(os.Stdin)
			require.ErrorIs(t, err, errors.ErrUnsupported, "Windows has no descriptor passing")
			return
		}
		std, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		f, err := std.(*net.TCPListener).File()
		require.NoError(t, err)
		std.Close()
		defer f.Close()
		s := newServer(t, HandlerFunc(testHandler), WithNetOptions(vnet.WithBackend(b), vnet.WithLoops(2)))
		addr, err := s.ListenFiles(f)
		require.NoError(t, err)
		c, br := rawConn(t, s)
		c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		_, body := readResponse(t, br, "GET")
		require.Equal(t, "Hello, World!", body)
		files, err := s.ListenerFiles(addr)
		require.NoError(t, err)
		require.Len(t, files, 1)
		for _, f := range files {
			f.Close()
		}
		reg, err := os.CreateTemp(backendtest.TempDir(t), "x")
		require.NoError(t, err)
		defer reg.Close()
		_, err = s.ListenFiles(reg)
		require.True(t, errors.Is(err, vnet.ErrNotSocket), "%v", err)
	})
}
