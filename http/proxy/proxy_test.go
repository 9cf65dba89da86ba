//go:build unix

package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	vhttp "github.com/veloq/veloq/http"
	vnet "github.com/veloq/veloq/net"
)

// echoStd answers with the method, path, body and the fields it got.
func echoStd(w nethttp.ResponseWriter, r *nethttp.Request) {
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("X-Method", r.Method)
	w.Header().Set("X-Path", r.URL.RequestURI())
	w.Header().Set("X-Host", r.Host)
	for k, v := range r.Header {
		w.Header().Set("X-Got-"+k, strings.Join(v, " | "))
	}
	w.Write(body)
}

func TestGetPost(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		std := stdUpstream(t, echoStd)
		veloq := serve(t, b, vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
			w.Header().Set("X-Method", string(r.Method))
			w.Header().Set("X-Path", string(r.Target))
			w.Write(r.Body)
		}))
		for _, up := range []string{std, veloq} {
			p := newProxy(t, WithUpstreams(up))
			addr := serve(t, b, p)
			c := httpClient()
			for i := 0; i < 3; i++ {
				resp, err := c.Get("http://" + addr + "/a/b?x=" + strconv.Itoa(i))
				require.NoError(t, err)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.Equal(t, 200, resp.StatusCode)
				require.Equal(t, "GET", resp.Header.Get("X-Method"))
				require.Equal(t, "/a/b?x="+strconv.Itoa(i), resp.Header.Get("X-Path"))
				require.Empty(t, body)

				payload := strings.Repeat("p", 10000+i)
				resp, err = c.Post("http://"+addr+"/post", "text/plain", strings.NewReader(payload))
				require.NoError(t, err)
				body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				require.Equal(t, 200, resp.StatusCode)
				require.Equal(t, "POST", resp.Header.Get("X-Method"))
				require.Equal(t, payload, string(body))
			}
			st := p.Stats()
			require.Equal(t, uint64(6), st.Upstreams[0].Requests)
			require.Equal(t, uint64(1), st.Client.NewConns, "one upstream connection, reused")
		}
	})
}

// Hop-by-hop fields go neither way; X-Forwarded-* are set; Host passes.
func TestHeaders(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := rawUpstream(t, func(r *nethttp.Request) ([]byte, bool) {
			var sb strings.Builder
			// Echo what arrived as X-Got-* fields, plus hop-by-hop ones.
			keys := []string{"X-Secret", "Keep-Alive", "Proxy-Connection", "Te", "Upgrade", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host", "X-Keep", "Forwarded", "Via"}
			for _, k := range keys {
				if v, ok := r.Header[k]; ok {
					fmt.Fprintf(&sb, "X-Got-%s: %s\r\n", k, strings.Join(v, " | "))
				}
			}
			fmt.Fprintf(&sb, "X-Got-Host: %s\r\n", r.Host)
			return []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive, X-Up-Secret\r\n" +
				"X-Up-Secret: s\r\nKeep-Alive: timeout=5\r\nProxy-Connection: keep-alive\r\nUpgrade: nope\r\nX-Up-Keep: k\r\n" +
				sb.String() + "\r\nok"), false
		})
		p := newProxy(t, WithUpstreams(up), WithVia("veloq"), WithForwarded(true))
		addr := serve(t, b, p)
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		br := bufio.NewReader(conn)
		for i := 0; i < 2; i++ {
			_, err = conn.Write([]byte("GET /h HTTP/1.1\r\nHost: front.example\r\nConnection: X-Secret\r\nX-Secret: 1\r\n" +
				"Keep-Alive: 300\r\nProxy-Connection: keep-alive\r\nTE: trailers, deflate\r\nUpgrade: websocket\r\n" +
				"X-Forwarded-For: 10.0.0.1\r\nX-Forwarded-Proto: ftp\r\nX-Keep: yes\r\n\r\n"))
			require.NoError(t, err)
			resp, err := nethttp.ReadResponse(br, nil)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, "ok", string(body))
			h := resp.Header
			require.Empty(t, h.Get("X-Got-X-Secret"), "a field Connection names is dropped")
			require.Empty(t, h.Get("X-Got-Keep-Alive"))
			require.Empty(t, h.Get("X-Got-Proxy-Connection"))
			require.Empty(t, h.Get("X-Got-Upgrade"))
			require.Equal(t, "trailers", h.Get("X-Got-Te"))
			require.Equal(t, "yes", h.Get("X-Got-X-Keep"))
			require.Equal(t, "10.0.0.1, 127.0.0.1", h.Get("X-Got-X-Forwarded-For"))
			require.Equal(t, "http", h.Get("X-Got-X-Forwarded-Proto"))
			require.Equal(t, "front.example", h.Get("X-Got-X-Forwarded-Host"))
			require.Equal(t, "front.example", h.Get("X-Got-Host"))
			require.Equal(t, `for=127.0.0.1;host="front.example";proto=http`, h.Get("X-Got-Forwarded"))
			require.Equal(t, "1.1 veloq", h.Get("X-Got-Via"))
			// The response's hop-by-hop fields are dropped too.
			require.Empty(t, h.Get("X-Up-Secret"))
			require.Empty(t, h.Get("Keep-Alive"))
			require.Empty(t, h.Get("Proxy-Connection"))
			require.Empty(t, h.Get("Upgrade"))
			require.Equal(t, "k", h.Get("X-Up-Keep"))
			require.Equal(t, "1.1 veloq", h.Get("Via"))
			require.NotContains(t, h.Get("Connection"), "X-Up-Secret")
		}
	})
}

func TestHostRewrite(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := stdUpstream(t, echoStd)
		p := newProxy(t, WithUpstreams(up), WithHost("inner.local"))
		addr := serve(t, b, p)
		req, _ := nethttp.NewRequest("GET", "http://"+addr+"/", nil)
		req.Host = "outer.example"
		resp, err := httpClient().Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, "inner.local", resp.Header.Get("X-Host"))
		require.Equal(t, "outer.example", resp.Header.Get("X-Got-X-Forwarded-Host"))
	})
}

func TestHead(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := stdUpstream(t, func(w nethttp.ResponseWriter, r *nethttp.Request) {
			w.Header().Set("Content-Length", "1234")
			if r.Method != "HEAD" {
				w.Write(make([]byte, 1234))
			}
		})
		p := newProxy(t, WithUpstreams(up))
		addr := serve(t, b, p)
		conn, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		defer conn.Close()
		br := bufio.NewReader(conn)
		_, err = conn.Write([]byte("HEAD / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n"))
		require.NoError(t, err)
		req, _ := nethttp.NewRequest("HEAD", "/", nil)
		resp, err := nethttp.ReadResponse(br, req)
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		require.EqualValues(t, 1234, resp.ContentLength, "the upstream's length passes through a HEAD")
		require.Empty(t, resp.TransferEncoding)
		resp.Body.Close()
		resp, err = nethttp.ReadResponse(br, nil)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Len(t, body, 1234, "the HEAD answer had no body: the next answer is framed right")
	})
}

func TestChunkedTrailers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		up := rawUpstream(t, func(r *nethttp.Request) ([]byte, bool) {
			return []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n" +
				"5\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 42\r\n\r\n"), false
		})
		p := newProxy(t, WithUpstreams(up))
		addr := serve(t, b, p)
		c := httpClient()
		for i := 0; i < 2; i++ {
			resp, err := c.Get("http://" + addr + "/")
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, "hello world", string(body))
			require.Equal(t, []string{"chunked"}, resp.TransferEncoding)
			require.Equal(t, "42", resp.Trailer.Get("X-Sum"))
		}
	})
}
