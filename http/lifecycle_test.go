package http

import (
	"context"
	"io"
	"io/fs"
	"net"
	nethttp "net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/reactor"
)

// unixGet sends GET / over the Unix socket at path from an unbound client
// and returns the response body.
func unixGet(t *testing.T, path string) string {
	t.Helper()
	cl := &nethttp.Client{
		Timeout: 10 * time.Second,
		Transport: &nethttp.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}},
	}
	defer cl.CloseIdleConnections()
	resp, err := cl.Get("http://unix/")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// Request.RemoteAddr of a Unix client that never bound a name is what
// net/http gives for it ("@"), on the fast path and through FromStd.
func TestUnixUnnamedRemoteAddr(t *testing.T) {
	// What net/http says, measured rather than assumed.
	stdPath := filepath.Join(t.TempDir(), "std.sock")
	ln, err := net.Listen("unix", stdPath)
	require.NoError(t, err)
	stdSrv := &nethttp.Server{Handler: nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		io.WriteString(w, r.RemoteAddr)
	})}
	go stdSrv.Serve(ln)
	want := unixGet(t, stdPath)
	stdSrv.Close()
	require.NotEmpty(t, want, "net/http's RemoteAddr for an unnamed Unix peer")

	handlers := []struct {
		name string
		h    Handler
	}{
		{"fast", HandlerFunc(func(w *ResponseWriter, _ *Request) { w.WriteString(w.RemoteAddr().String()) })},
		{"FromStd", FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			io.WriteString(w, r.RemoteAddr)
		}))},
	}
	forEachBackend(t, func(t *testing.T, b reactor.Backend) {
		for _, tc := range handlers {
			t.Run(tc.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "veloq.sock")
				s := NewServer(tc.h, WithBackend(b), WithLoops(2), WithLogger(testLogger(t)))
				_, err := s.Listen("unix", path)
				require.NoError(t, err)
				defer s.Close()
				require.Equal(t, want, unixGet(t, path))
			})
		}
	})
}

// Server.ListenAndServe serves like the package-level function while the
// caller keeps the Server and reads its Stats; it returns nil when its
// context ends and ErrServerClosed when the server is closed under it. A
// Unix socket file it bound is gone afterwards.
func TestServerListenAndServe(t *testing.T) {
	stops := []struct {
		name string
		stop func(s *Server, cancel context.CancelFunc)
		want error
	}{
		{"context", func(_ *Server, cancel context.CancelFunc) { cancel() }, nil},
		{"Close", func(s *Server, _ context.CancelFunc) { s.Close() }, ErrServerClosed},
	}
	forEachBackend(t, func(t *testing.T, b reactor.Backend) {
		for _, st := range stops {
			t.Run(st.name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "veloq.sock")
				s := NewServer(HandlerFunc(testHandler), WithBackend(b), WithLoops(2), WithLogger(testLogger(t)))
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				served := make(chan error, 1)
				go func() { served <- s.ListenAndServe(ctx, "unix", path, 5*time.Second) }()
				require.Eventually(t, func() bool { return s.Addr() != nil }, 10*time.Second, time.Millisecond, "never listened")
				require.Equal(t, "Hello, World!", unixGet(t, path))
				// Counted after the loop iteration that answered, which may end
				// after the client has the response.
				require.Eventually(t, func() bool { return s.Stats().Requests == 1 }, 10*time.Second, time.Millisecond, "Stats while serving")

				st.stop(s, cancel)
				select {
				case err := <-served:
					require.ErrorIs(t, err, st.want)
				case <-time.After(20 * time.Second):
					t.Fatal("ListenAndServe did not return")
				}
				_, err := s.Listen("unix", path)
				require.ErrorIs(t, err, ErrServerClosed, "the server is stopped when ListenAndServe returns")
				_, err = os.Stat(path)
				require.ErrorIs(t, err, fs.ErrNotExist, "the socket file outlived the server")
			})
		}
	})
}
