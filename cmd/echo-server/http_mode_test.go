package main

import (
	"context"
	"io"
	nethttp "net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// -mode http-std answers like -mode http: the hello on GET /, the echo on
// POST /echo, 404 elsewhere.
func TestHTTPStdHandler(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		s, err := vhttp.NewServer(vhttp.FromStd(stdHTTPHandler()), vhttp.WithNetOptions(vnet.WithBackend(b)), vhttp.WithNetOptions(vnet.WithLoops(1)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		defer func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			require.NoError(t, s.Shutdown(ctx))
		}()
		cl := &nethttp.Client{Timeout: 5 * time.Second}
		defer cl.CloseIdleConnections()
		base := "http://" + s.Addr().String()

		resp, err := cl.Get(base + "/")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		require.Equal(t, helloBody, string(body))
		require.Equal(t, "text/plain", resp.Header.Get("Content-Type"))

		resp, err = cl.Post(base+"/echo", "application/x-test", strings.NewReader("payload"))
		require.NoError(t, err)
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, "payload", string(body))
		require.Equal(t, "POST", resp.Header.Get("X-Method"))
		require.Equal(t, "application/x-test", resp.Header.Get("Content-Type"))

		resp, err = cl.Get(base + "/nope")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 404, resp.StatusCode)
	})
}

// -static is refused outside HTTP mode and for a path that is not a
// directory, before anything listens.
func TestStaticFlagRefusals(t *testing.T) {
	file := backendtest.TempDir(t) + "/f"
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"tcp mode", []string{"-mode", "tcp", "-static", backendtest.TempDir(t), "-addr", "127.0.0.1:0"}, "-static needs -mode http"},
		{"missing", []string{"-mode", "http", "-static", backendtest.TempDir(t) + "/none", "-addr", "127.0.0.1:0"}, "not a directory"},
		{"file", []string{"-mode", "http", "-static", file, "-addr", "127.0.0.1:0"}, "not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := run(tc.args)
			require.ErrorContains(t, err, tc.want)
		})
	}
}
