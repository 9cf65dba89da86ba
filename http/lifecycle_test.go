package http

import (
	"context"
	"io"
	"io/fs"
	"net"
	nethttp "net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"

	vnet "github.com/veloq/veloq/net"
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
	backendtest.SkipUnderWine(t, "it has no AF_UNIX sockets")
	// What net/http says, measured rather than assumed.
	stdPath := filepath.Join(backendtest.TempDir(t), "std.sock")
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
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		for _, tc := range handlers {
			t.Run(tc.name, func(t *testing.T) {
				path := filepath.Join(backendtest.TempDir(t), "veloq.sock")
				s := newServer(t, tc.h, WithNetOptions(vnet.WithBackend(b)), WithNetOptions(vnet.WithLoops(2)), WithLogger(testLogger(t)))
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
	backendtest.SkipUnderWine(t, "it has no AF_UNIX sockets")
	stops := []struct {
		name string
		stop func(s *Server, cancel context.CancelFunc)
		want error
	}{
		{"context", func(_ *Server, cancel context.CancelFunc) { cancel() }, nil},
		{"Close", func(s *Server, _ context.CancelFunc) { s.Close() }, ErrServerClosed},
	}
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		for _, st := range stops {
			t.Run(st.name, func(t *testing.T) {
				path := filepath.Join(backendtest.TempDir(t), "veloq.sock")
				s := newServer(t, HandlerFunc(testHandler), WithNetOptions(vnet.WithBackend(b)), WithNetOptions(vnet.WithLoops(2)), WithLogger(testLogger(t)))
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

// Shutdown does not wait for a hijacked connection, as net/http's does
// not: it returns well within its grace, the connection stays open and
// served after it, the RegisterOnShutdown function runs, and Close cuts
// the connection. For both ways to hijack: a FromStd handler's
// http.Hijacker and the fast ResponseWriter.Hijack.
func TestShutdownLeavesHijacked(t *testing.T) {
	echo := &vnet.HandlerFuncs{
		Open: func(c *vnet.Conn) { c.WriteString("hijacked\n") },
		Data: func(c *vnet.Conn) {
			b, _ := c.Next(-1)
			c.Write(b)
		},
	}
	handlers := []struct {
		name string
		h    Handler
	}{
		{"FromStd", FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			w.Header().Set("Connection", "Upgrade")
			w.Header().Set("Upgrade", "echo")
			w.WriteHeader(StatusSwitchingProtocols)
			conn, _, err := w.(nethttp.Hijacker).Hijack()
			if err != nil {
				return
			}
			defer conn.Close()
			io.WriteString(conn, "hijacked\n")
			io.Copy(conn, conn) // until Close cuts it
		}))},
		{"fast", HandlerFunc(func(w *ResponseWriter, r *Request) {
			w.Header().Set("Connection", "Upgrade")
			w.Header().Set("Upgrade", "echo")
			w.WriteHeader(StatusSwitchingProtocols)
			w.Hijack(echo)
		})},
	}
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		for _, tc := range handlers {
			t.Run(tc.name, func(t *testing.T) {
				s := newServer(t, tc.h, WithNetOptions(vnet.WithBackend(b)), WithNetOptions(vnet.WithLoops(2)), WithLogger(testLogger(t)))
				addr, err := s.Listen("tcp", "127.0.0.1:0")
				require.NoError(t, err)
				t.Cleanup(func() { s.Close() })
				ran := make(chan struct{})
				s.RegisterOnShutdown(func() { close(ran) })

				c, br := rawConn(t, s)
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
				resp, err := nethttp.ReadResponse(br, nil)
				require.NoError(t, err)
				require.Equal(t, StatusSwitchingProtocols, resp.StatusCode)
				line, err := br.ReadString('\n')
				require.NoError(t, err)
				require.Equal(t, "hijacked\n", line)

				const grace = 30 * time.Second
				ctx, cancel := context.WithTimeout(context.Background(), grace)
				defer cancel()
				shut := make(chan error, 1)
				go func() { shut <- s.Shutdown(ctx) }()
				select {
				case err := <-shut:
					require.NoError(t, err)
				case <-time.After(grace / 3):
					t.Fatal("Shutdown waited for the hijacked connection")
				}
				select {
				case <-ran:
				case <-time.After(10 * time.Second):
					t.Fatal("the RegisterOnShutdown function did not run")
				}
				_, err = net.DialTimeout("tcp", addr.String(), 5*time.Second)
				require.Error(t, err, "still accepting after Shutdown")

				// Still open and served, as net/http leaves it.
				io.WriteString(c, "after shutdown\n")
				line, err = br.ReadString('\n')
				require.NoError(t, err)
				require.Equal(t, "after shutdown\n", line)

				require.NoError(t, s.Close())
				rest, err := io.ReadAll(br)
				if err != nil && !strings.Contains(err.Error(), "reset") {
					t.Fatalf("hijacked connection not closed by Close: %v (read %q)", err, rest)
				}
			})
		}
	})
}

// RegisterOnShutdown functions run on Shutdown even when the server never
// listened, and not on Close (as in net/http).
func TestRegisterOnShutdown(t *testing.T) {
	cases := []struct {
		name string
		stop func(*Server) error
		runs bool
	}{
		{"Shutdown", func(s *Server) error { return s.Shutdown(context.Background()) }, true},
		{"Close", (*Server).Close, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t, HandlerFunc(testHandler))
			ran := make(chan struct{}, 2)
			s.RegisterOnShutdown(func() { ran <- struct{}{} })
			s.RegisterOnShutdown(func() { ran <- struct{}{} })
			require.NoError(t, tc.stop(s))
			if !tc.runs {
				require.Never(t, func() bool { return len(ran) > 0 }, 50*time.Millisecond, time.Millisecond)
				return
			}
			require.Eventually(t, func() bool { return len(ran) == 2 }, 10*time.Second, time.Millisecond)
		})
	}
}

// NewServer starts the loops, as vnet.NewServer does: the TCP server and
// its statistics are there before Listen (a metrics collector can be
// registered at once), and Close releases the loops of a server that
// never listened.
func TestNewServerStartsLoops(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		before := backendtest.CountFDs(t)
		s := newServer(t, HandlerFunc(testHandler), WithNetOptions(vnet.WithBackend(b)), WithNetOptions(vnet.WithLoops(2)), WithLogger(testLogger(t)))
		ns := s.NetServer()
		require.NotNil(t, ns)
		require.Len(t, ns.Loops(), 2)
		require.Equal(t, b, ns.Backend())
		require.Zero(t, s.Stats().Conns)
		require.Nil(t, s.Addr())
		require.NoError(t, s.Close())
		require.ErrorIs(t, s.NetServer().Loops()[0].Post(func() {}), vnet.ErrClosed)
		require.Eventually(t, func() bool { return backendtest.CountFDs(t) <= before }, 10*time.Second, 5*time.Millisecond,
			"descriptors: %d before, %s after", before, listFDs())
		_, err := s.Listen("tcp", "127.0.0.1:0")
		require.ErrorIs(t, err, ErrServerClosed)
	})
}
