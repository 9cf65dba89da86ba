package http

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	nethttp "net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// A net/http handler hijacks the connection through FromStd: the bytes
// the client sent after the request are read first, the conn echoes a
// large stream both ways (backpressure on both sides), deadlines work,
// and the server forgets the connection.
func TestFromStdHijack(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		handlerErr := make(chan error, 1)
		deadlineErr := make(chan error, 1)
		h := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			conn, brw, err := w.(nethttp.Hijacker).Hijack()
			if err != nil {
				handlerErr <- err
				return
			}
			if _, err := w.Write([]byte("x")); !errors.Is(err, nethttp.ErrHijacked) {
				handlerErr <- errors.New("Write after Hijack did not fail with ErrHijacked")
				conn.Close()
				return
			}
			go func() {
				defer conn.Close()
				brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: upper\r\nConnection: Upgrade\r\n\r\n")
				brw.Flush()
				// First a read deadline that passes with nothing to read.
				line, err := brw.ReadString('\n')
				if err != nil || line != "wait\n" {
					handlerErr <- errors.New("first line: " + line)
					return
				}
				conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
				_, err = brw.ReadByte()
				deadlineErr <- err
				conn.SetReadDeadline(time.Time{})
				// Then echo upper-cased until the client half-closes.
				buf := make([]byte, 32<<10)
				for {
					n, err := brw.Read(buf)
					if n > 0 {
						if _, werr := conn.Write(bytes.ToUpper(buf[:n])); werr != nil {
							handlerErr <- werr
							return
						}
					}
					if err == io.EOF {
						handlerErr <- nil
						return
					}
					if err != nil {
						handlerErr <- err
						return
					}
				}
			}()
		})
		s := startServer(t, b, FromStd(h))
		c, err := net.Dial("tcp", s.Addr().String())
		require.NoError(t, err)
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second))
		// The first line arrives with the request: it must reach the
		// hijacked connection, not the HTTP parser.
		io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: upper\r\nConnection: Upgrade\r\n\r\nwait\n")
		br := bufio.NewReader(c)
		resp, err := nethttp.ReadResponse(br, nil)
		require.NoError(t, err)
		require.Equal(t, 101, resp.StatusCode)
		require.ErrorIs(t, <-deadlineErr, os.ErrDeadlineExceeded)
		require.Eventually(t, func() bool { st := s.Stats(); return st.Hijacked == 1 && st.Conns == 0 }, 5*time.Second, 5*time.Millisecond)

		const size = 4 << 20
		payload := bytes.Repeat([]byte("abcdefghijklmnop"), size/16)
		go func() {
			c.Write(payload)
			c.(*net.TCPConn).CloseWrite()
		}()
		got, err := io.ReadAll(br)
		require.NoError(t, err)
		require.Equal(t, len(payload), len(got))
		require.True(t, bytes.Equal(bytes.ToUpper(payload), got))
		require.NoError(t, <-handlerErr)
	})
}

// Hijack after a head was written sends that head first; a second Hijack
// fails with ErrHijacked. Close closes a hijacked connection, which
// Shutdown leaves open.
func TestFromStdHijackAfterHead(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		second := make(chan error, 1)
		h := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			w.Header().Set("Upgrade", "raw")
			w.Header().Set("Connection", "Upgrade")
			w.WriteHeader(StatusSwitchingProtocols)
			conn, _, err := w.(nethttp.Hijacker).Hijack()
			if err != nil {
				second <- err
				return
			}
			_, _, err = w.(nethttp.Hijacker).Hijack()
			second <- err
			io.WriteString(conn, "raw bytes")
			// conn is left open: the server's Close closes it.
		})
		s := newServer(t, FromStd(h), WithNetOptions(vnet.WithBackend(b)), WithNetOptions(vnet.WithLoops(1)), WithLogger(testLogger(t)))
		if _, err := s.Listen("tcp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		c, br := rawConn(t, s)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := nethttp.ReadResponse(br, nil)
		require.NoError(t, err)
		require.Equal(t, 101, resp.StatusCode)
		require.Equal(t, "raw", resp.Header.Get("Upgrade"))
		require.ErrorIs(t, <-second, nethttp.ErrHijacked)
		raw := make([]byte, len("raw bytes"))
		_, err = io.ReadFull(br, raw)
		require.NoError(t, err)
		require.Equal(t, "raw bytes", string(raw))

		s.Close()
		rest, err := io.ReadAll(br)
		if err != nil && !strings.Contains(err.Error(), "reset") {
			t.Fatalf("hijacked connection not closed by Close: %v (read %q)", err, rest)
		}
	})
}

// A hijacked connection's write deadline bounds a Write waiting on a
// client that does not read, and CloseWrite half-closes it.
func TestFromStdHijackWriteDeadlineAndCloseWrite(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		writeErr := make(chan error, 1)
		h := nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			conn, _, err := w.(nethttp.Hijacker).Hijack()
			if err != nil {
				writeErr <- err
				return
			}
			defer conn.Close()
			if r.URL.Path == "/half" {
				io.WriteString(conn, "bye")
				if err := conn.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
					writeErr <- err
					return
				}
				// Half-closed: reading still works.
				got, err := io.ReadAll(conn)
				if err == nil && string(got) != "after" {
					err = errors.New("read after CloseWrite: " + string(got))
				}
				writeErr <- err
				return
			}
			conn.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
			chunk := make([]byte, 64<<10)
			for range 4096 { // far more than the socket buffers hold
				if _, err := conn.Write(chunk); err != nil {
					writeErr <- err
					return
				}
			}
			writeErr <- nil
		})
		s := startServer(t, b, FromStd(h))

		c, _ := rawConn(t, s)
		io.WriteString(c, "GET /block HTTP/1.1\r\nHost: x\r\n\r\n") // then never read
		select {
		case err := <-writeErr:
			require.ErrorIs(t, err, os.ErrDeadlineExceeded)
		case <-time.After(10 * time.Second):
			t.Fatal("write deadline never hit")
		}
		c.Close()

		c, br := rawConn(t, s)
		io.WriteString(c, "GET /half HTTP/1.1\r\nHost: x\r\n\r\n")
		got, err := io.ReadAll(br) // EOF after the bytes while the server still reads
		require.NoError(t, err)
		require.Equal(t, "bye", string(got))
		io.WriteString(c, "after")
		c.(*net.TCPConn).CloseWrite()
		require.NoError(t, <-writeErr)
	})
}
