package http

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net"
	nethttp "net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/executor"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// fsTree is the directory the file tests serve.
type fsTree struct {
	dir   string
	big   []byte // big.bin: more than a socket buffer takes at once
	small []byte // small.txt: read inline by the pool task
}

func patternBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31+i/257) ^ seed
	}
	return b
}

func newFSTree(t *testing.T) *fsTree {
	t.Helper()
	dir := backendtest.TempDir(t)
	tr := &fsTree{dir: dir, big: patternBytes(1<<20+12345, 7), small: []byte(strings.Repeat("hello, file\n", 80))}
	write := func(name string, data []byte) {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, data, 0o644))
	}
	write("big.bin", tr.big)
	write("small.txt", tr.small)
	write("site/index.html", []byte("<html><body>index</body></html>"))
	write("noindex/a.txt", []byte("a"))
	write("sniffed", append([]byte("<!DOCTYPE html><html>"), patternBytes(40<<10, 1)...))
	require.NoError(t, os.WriteFile(filepath.Join(filepath.Dir(dir), "secret-"+filepath.Base(dir)), []byte("secret"), 0o644))
	return tr
}

func baseURL(s *Server, scheme string) string {
	return scheme + "://127.0.0.1:" + strconv.Itoa(s.Addr().(*net.TCPAddr).Port)
}

func get(t *testing.T, cl *nethttp.Client, method, url string, fields ...string) (*nethttp.Response, []byte) {
	t.Helper()
	req, err := nethttp.NewRequest(method, url, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(fields); i += 2 {
		req.Header.Set(fields[i], fields[i+1])
	}
	resp, err := cl.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, body
}

// checkMultipart parses a multipart/byteranges body and compares each
// part with the file.
func checkMultipart(t *testing.T, resp *nethttp.Response, body, file []byte, want []byteRange) {
	t.Helper()
	mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	require.NoError(t, err)
	require.Equal(t, "multipart/byteranges", mt)
	require.Equal(t, strconv.Itoa(len(body)), resp.Header.Get("Content-Length"))
	mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
	for i, r := range want {
		p, err := mr.NextPart()
		require.NoError(t, err, "part %d", i)
		require.Equal(t, r.contentRange(int64(len(file))), p.Header.Get("Content-Range"))
		data, err := io.ReadAll(p)
		require.NoError(t, err)
		require.True(t, bytes.Equal(file[r.start:r.start+r.length], data), "part %d differs", i)
	}
	_, err = mr.NextPart()
	require.ErrorIs(t, err, io.EOF)
}

// FileServer answers with net/http's semantics on both backends: whole
// files, HEAD, ranges, multi-ranges, 416, conditional requests,
// directories and errors.
func TestFileServerSemantics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		tr := newFSTree(t)
		s := startServer(t, b, FileServer(tr.dir))
		base, cl := baseURL(s, "http"), newClient()
		size := int64(len(tr.big))

		resp, body := get(t, cl, "GET", base+"/big.bin")
		require.Equal(t, 200, resp.StatusCode)
		require.True(t, bytes.Equal(tr.big, body), "GET: %d bytes, want %d", len(body), len(tr.big))
		etag, lastMod := resp.Header.Get("ETag"), resp.Header.Get("Last-Modified")
		require.NotEmpty(t, etag)
		require.NotEmpty(t, lastMod)
		require.Equal(t, "bytes", resp.Header.Get("Accept-Ranges"))

		cases := []struct {
			name, method, path string
			fields             []string
			status             int
			body               []byte // nil: not checked
			header             map[string]string
		}{
			{name: "small", method: "GET", path: "/small.txt", status: 200, body: tr.small,
				header: map[string]string{"Content-Type": "text/plain; charset=utf-8"}},
			{name: "sniffed", method: "GET", path: "/sniffed", status: 200,
				header: map[string]string{"Content-Type": "text/html; charset=utf-8"}},
			{name: "head", method: "HEAD", path: "/big.bin", status: 200, body: []byte{},
				header: map[string]string{"Content-Length": strconv.FormatInt(size, 10)}},
			{name: "range", method: "GET", path: "/big.bin", fields: []string{"Range", "bytes=100-299999"}, status: 206,
				body: tr.big[100:300000], header: map[string]string{"Content-Range": fmt.Sprintf("bytes 100-299999/%d", size)}},
			{name: "suffix", method: "GET", path: "/big.bin", fields: []string{"Range", "bytes=-500"}, status: 206,
				body: tr.big[size-500:]},
			{name: "open-ended", method: "GET", path: "/big.bin", fields: []string{"Range", "bytes=1000000-"}, status: 206,
				body: tr.big[1000000:]},
			{name: "unsatisfiable", method: "GET", path: "/big.bin", fields: []string{"Range", "bytes=99999999-"}, status: 416,
				header: map[string]string{"Content-Range": fmt.Sprintf("bytes */%d", size)}},
			{name: "if-none-match", method: "GET", path: "/big.bin", fields: []string{"If-None-Match", etag}, status: 304, body: []byte{}},
			{name: "if-none-match-other", method: "GET", path: "/big.bin", fields: []string{"If-None-Match", `"other"`}, status: 200, body: tr.big},
			{name: "if-modified-since", method: "GET", path: "/big.bin", fields: []string{"If-Modified-Since", lastMod}, status: 304, body: []byte{}},
			{name: "if-unmodified-since-old", method: "GET", path: "/big.bin", fields: []string{"If-Unmodified-Since", "Mon, 02 Jan 2006 15:04:05 GMT"}, status: 412},
			{name: "if-match-other", method: "GET", path: "/big.bin", fields: []string{"If-Match", `"other"`}, status: 412},
			{name: "if-range-stale", method: "GET", path: "/big.bin", fields: []string{"Range", "bytes=0-9", "If-Range", `"stale"`}, status: 200, body: tr.big},
			{name: "if-range-current", method: "GET", path: "/big.bin", fields: []string{"Range", "bytes=0-9", "If-Range", etag}, status: 206, body: tr.big[:10]},
			{name: "directory-redirect", method: "GET", path: "/site", status: 301, header: map[string]string{"Location": "site/"}},
			{name: "index", method: "GET", path: "/site/", status: 200, body: []byte("<html><body>index</body></html>"),
				header: map[string]string{"Content-Type": "text/html; charset=utf-8"}},
			{name: "no-index", method: "GET", path: "/noindex/", status: 403},
			{name: "missing", method: "GET", path: "/missing.txt", status: 404},
			{name: "escaped-dotdot", method: "GET", path: "/%2e%2e/secret-" + filepath.Base(tr.dir), status: 400},
		}
		noRedirect := *cl
		noRedirect.CheckRedirect = func(*nethttp.Request, []*nethttp.Request) error { return nethttp.ErrUseLastResponse }
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				resp, body := get(t, &noRedirect, tc.method, base+tc.path, tc.fields...)
				require.Equal(t, tc.status, resp.StatusCode)
				if tc.body != nil {
					require.Equal(t, len(tc.body), len(body))
					require.True(t, bytes.Equal(tc.body, body), "body differs")
				}
				for k, v := range tc.header {
					require.Equal(t, v, resp.Header.Get(k), k)
				}
			})
		}

		t.Run("multi-range", func(t *testing.T) {
			resp, body := get(t, cl, "GET", base+"/big.bin", "Range", "bytes=0-9,500000-700000,-100")
			require.Equal(t, 206, resp.StatusCode)
			checkMultipart(t, resp, body, tr.big, []byteRange{{0, 10}, {500000, 200001}, {size - 100, 100}})
		})

		t.Run("raw-dotdot", func(t *testing.T) {
			c, br := rawConn(t, s)
			fmt.Fprintf(c, "GET /../secret-%s HTTP/1.1\r\nHost: x\r\n\r\n", filepath.Base(tr.dir))
			resp, body := readResponse(t, br, "GET")
			require.Equal(t, 400, resp.StatusCode)
			require.NotContains(t, body, "secret")
		})
	})
}

// The same bytes arrive over TLS, where the file is copied in bounded
// chunks instead of sent with sendfile.
func TestFileServerTLS(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		tr := newFSTree(t)
		s := startServer(t, b, FileServer(tr.dir), WithTLS(testCert().ServerConfig()))
		base, cl := baseURL(s, "https"), tlsClient()
		cl.Transport.(*nethttp.Transport).TLSClientConfig.ServerName = "localhost"
		resp, body := get(t, cl, "GET", base+"/big.bin")
		require.Equal(t, 200, resp.StatusCode)
		require.True(t, bytes.Equal(tr.big, body), "GET over TLS: %d bytes, want %d", len(body), len(tr.big))
		resp, body = get(t, cl, "GET", base+"/big.bin", "Range", "bytes=10-20,300000-")
		require.Equal(t, 206, resp.StatusCode)
		size := int64(len(tr.big))
		checkMultipart(t, resp, body, tr.big, []byteRange{{10, 11}, {300000, size - 300000}})
	})
}

// Pipelined requests for files are answered in order, each complete.
func TestFileServerPipelined(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		tr := newFSTree(t)
		s := startServer(t, b, FileServer(tr.dir))
		c, br := rawConn(t, s)
		reqs := "GET /big.bin HTTP/1.1\r\nHost: x\r\n\r\n" +
			"GET /small.txt HTTP/1.1\r\nHost: x\r\n\r\n" +
			"HEAD /big.bin HTTP/1.1\r\nHost: x\r\n\r\n" +
			"GET /big.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=5-1000004\r\n\r\n" +
			"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n"
		_, err := c.Write([]byte(reqs))
		require.NoError(t, err)
		want := []struct {
			method string
			status int
			body   []byte
		}{
			{"GET", 200, tr.big}, {"GET", 200, tr.small}, {"HEAD", 200, nil}, {"GET", 206, tr.big[5:1000005]}, {"GET", 404, nil},
		}
		for i, w := range want {
			resp, body := readResponse(t, br, w.method)
			require.Equal(t, w.status, resp.StatusCode, "response %d", i)
			if w.body != nil {
				require.True(t, bytes.Equal(w.body, []byte(body)), "response %d: %d bytes, want %d", i, len(body), len(w.body))
			}
		}
	})
}

// Clients that close in the middle of a large file release it: after
// the server stops, the process has no more descriptors than before.
func TestFileServerClientCloseReleases(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		dir := backendtest.TempDir(t)
		f, err := os.Create(filepath.Join(dir, "big"))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(64<<20))
		f.Close()
		before := backendtest.CountFDs(t)
		s := newServer(t, FileServer(dir), WithNetOptions(vnet.WithBackend(b)), WithNetOptions(vnet.WithLoops(2)), WithLogger(testLogger(t)))
		_, err = s.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		for i := range 4 {
			c, err := net.Dial("tcp", s.Addr().String())
			require.NoError(t, err)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
			_, err = io.ReadFull(c, make([]byte, 1<<20))
			require.NoError(t, err)
			if i%2 == 0 {
				c.(*net.TCPConn).SetLinger(0) // a reset, then a plain close
			}
			c.Close()
		}
		require.Eventually(t, func() bool { return s.Stats().Conns == 0 }, 10*time.Second, 5*time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Shutdown(ctx))
		// A read of the file still on the pool when the loops stopped
		// releases its socket duplicate and file when it returns. Only more
		// descriptors afterwards is a leak (another loop's idle pipe may
		// be trimmed meanwhile).
		require.Eventually(t, func() bool { return backendtest.CountFDs(t) <= before }, 10*time.Second, 5*time.Millisecond,
			"descriptors: %d before, %s after", before, listFDs())
	})
}

func listFDs() string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, e.Name()+"->"+target)
	}
	return strings.Join(out, " ")
}

// vmRSS returns the process's resident set in bytes.
func vmRSS(t *testing.T) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// A client that stops reading a 100 MiB file holds the server to what the
// socket buffers take: the file is sent only as the socket drains, and
// the process's memory does not grow by the file. Then the client reads
// the rest, all of it.
func TestFileServerSlowReaderBounded(t *testing.T) {
	const size = 100 << 20
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		for _, secure := range []bool{false, true} {
			t.Run(map[bool]string{false: "plain", true: "tls"}[secure], func(t *testing.T) {
				dir := backendtest.TempDir(t)
				f, err := os.Create(filepath.Join(dir, "huge"))
				require.NoError(t, err)
				require.NoError(t, f.Truncate(size))
				f.Close()
				pool := executor.NewBlockingPool()
				t.Cleanup(func() { pool.Shutdown(context.Background()) })
				opts := []Option{WithFilePool(pool)} // WithFilePool's use
				if secure {
					opts = append(opts, WithTLS(testCert().ServerConfig()))
				}
				s := startServer(t, b, FileServer(dir), opts...)
				raw, err := net.Dial("tcp", s.Addr().String())
				require.NoError(t, err)
				t.Cleanup(func() { raw.Close() })
				raw.SetDeadline(time.Now().Add(60 * time.Second))
				var c net.Conn = raw
				if secure {
					tc := tlsClientConn(raw)
					require.NoError(t, tc.Handshake())
					c = tc
				}
				rss0 := vmRSS(t)
				fmt.Fprintf(c, "GET /huge HTTP/1.1\r\nHost: x\r\n\r\n")
				br := bufio.NewReaderSize(c, 64<<10)
				resp, err := nethttp.ReadResponse(br, &nethttp.Request{Method: "GET"})
				require.NoError(t, err)
				require.Equal(t, strconv.Itoa(size), resp.Header.Get("Content-Length"))
				buf := make([]byte, 64<<10)
				_, err = io.ReadFull(resp.Body, buf[:1<<10])
				require.NoError(t, err)
				// Stop reading until the server's sending stops too.
				bytesOut := func() (n uint64) {
					for _, st := range s.NetServer().Stats() {
						n += st.BytesOut
					}
					return n
				}
				last := uint64(0)
				require.Eventually(t, func() bool {
					n := bytesOut()
					stalled := n == last
					last = n
					return stalled
				}, 20*time.Second, 200*time.Millisecond)
				// What left the server is what the socket buffers hold, not
				// the file (a TLS record's overhead is small).
				require.Less(t, last, uint64(32<<20), "the server sent %d bytes to a client that reads nothing", last)
				require.Less(t, vmRSS(t)-rss0, int64(48<<20), "memory grew with the file")
				total := int64(1 << 10)
				for {
					n, err := resp.Body.Read(buf)
					total += int64(n)
					if err == io.EOF {
						break
					}
					require.NoError(t, err)
				}
				require.Equal(t, int64(size), total)
			})
		}
	})
}

// ServeContent serves an open file with the caller's modification time,
// an ETag only if the handler set one, and closes the file itself.
func TestServeContent(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		tr := newFSTree(t)
		mod := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
		s := startServer(t, b, HandlerFunc(func(w *ResponseWriter, r *Request) {
			f, err := os.Open(filepath.Join(tr.dir, "big.bin"))
			if err != nil {
				w.WriteHeader(500)
				return
			}
			if r.Header("X-Tag") != nil {
				w.Header().Set("ETag", `"v1"`)
			}
			ServeContent(w, r, "data.json", mod, f)
		}))
		base, cl := baseURL(s, "http"), newClient()
		resp, body := get(t, cl, "GET", base+"/")
		require.Equal(t, 200, resp.StatusCode)
		require.True(t, bytes.Equal(tr.big, body))
		require.Equal(t, "application/json", resp.Header.Get("Content-Type"))
		require.Equal(t, mod.Format(nethttp.TimeFormat), resp.Header.Get("Last-Modified"))
		require.Empty(t, resp.Header.Get("ETag"))
		resp, _ = get(t, cl, "GET", base+"/", "X-Tag", "1", "If-None-Match", `W/"v1"`)
		require.Equal(t, 304, resp.StatusCode)
		resp, _ = get(t, cl, "GET", base+"/", "If-Modified-Since", mod.Add(time.Hour).Format(nethttp.TimeFormat))
		require.Equal(t, 304, resp.StatusCode)
	})
}

// tlsClientConn wraps raw in a TLS client that trusts the test
// certificate.
func tlsClientConn(raw net.Conn) *tls.Conn {
	return tls.Client(raw, testCert().ClientConfig("localhost"))
}

// A client that stops reading a file is cut by the write timeout, as one
// that stops reading any response: the file's unsent bytes count as
// pending output.
func TestFileServerWriteTimeout(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		dir := backendtest.TempDir(t)
		f, err := os.Create(filepath.Join(dir, "huge"))
		require.NoError(t, err)
		require.NoError(t, f.Truncate(100<<20))
		f.Close()
		s := startServer(t, b, FileServer(dir), WithWriteTimeout(300*time.Millisecond), WithReadHeaderTimeout(300*time.Millisecond))
		c, br := rawConn(t, s)
		fmt.Fprintf(c, "GET /huge HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := nethttp.ReadResponse(br, &nethttp.Request{Method: "GET"})
		require.NoError(t, err)
		require.Equal(t, 200, resp.StatusCode)
		require.Eventually(t, func() bool { return s.Stats().Timeouts == 1 && s.Stats().Conns == 0 }, 20*time.Second, 10*time.Millisecond)
		n, _ := io.Copy(io.Discard, resp.Body)
		require.Less(t, n, int64(100<<20), "the whole file arrived")
	})
}

// A file whose lookup is in the kernel's cache and whose type is known by
// its extension is served from the loop (no trip through the pool before
// the body); one that needs sniffing goes through the pool. Both answer
// the same bytes, whole and in ranges.
func TestFileServerInlineAndPooled(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		tr := newFSTree(t)
		for _, name := range []string{"big.png", "big.dat"} {
			require.NoError(t, os.WriteFile(filepath.Join(tr.dir, name), tr.big, 0o644))
		}
		s := startServer(t, b, FileServer(tr.dir))
		base, cl := baseURL(s, "http"), newClient()
		size := int64(len(tr.big))
		get(t, cl, "GET", base+"/big.png") // the lookup is cached from now on
		for _, tc := range []struct {
			name    string
			pooled  bool
			ctype   string
			offload uint64
		}{
			{"big.png", false, "image/png", 0},
			{"big.dat", true, "application/octet-stream", 1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if runtime.GOOS != "linux" {
					// No cached lookup (openat2's RESOLVE_CACHED) outside
					// Linux: every file's open goes through the pool.
					tc.offload = 1
				}
				before := s.Stats().Offloaded
				resp, body := get(t, cl, "GET", base+"/"+tc.name)
				require.Equal(t, 200, resp.StatusCode)
				require.True(t, bytes.Equal(tr.big, body))
				require.Equal(t, tc.ctype, resp.Header.Get("Content-Type"))
				require.Equal(t, tc.offload, s.Stats().Offloaded-before, "requests that went through the pool")
				resp, body = get(t, cl, "GET", base+"/"+tc.name, "Range", "bytes=70000-")
				require.Equal(t, 206, resp.StatusCode)
				require.True(t, bytes.Equal(tr.big[70000:], body))
				resp, body = get(t, cl, "GET", base+"/"+tc.name, "Range", "bytes=1-2,-3")
				require.Equal(t, 206, resp.StatusCode)
				checkMultipart(t, resp, body, tr.big, []byteRange{{1, 2}, {size - 3, 3}})
				resp, _ = get(t, cl, "GET", base+"/"+tc.name, "If-None-Match", resp.Header.Get("ETag"))
				require.Equal(t, 304, resp.StatusCode)
			})
		}
	})
}

// A server that serves no file does not load the system's MIME tables
// (hundreds of KB of small objects that every GC cycle marks again, which
// cost a FromStd server an eighth of its CPU per request). Run in a child
// process, so that no other test has loaded them.
func TestServerLeavesMIMETablesUnloaded(t *testing.T) {
	if os.Getenv("VELOQ_MIME_CHILD") == "1" {
		var m0, m1 runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m0)
		s := newServer(t, FromStd(nethttp.NotFoundHandler()))
		runtime.GC()
		runtime.ReadMemStats(&m1)
		runtime.KeepAlive(s)
		fmt.Printf("HEAPGROWTH %d\n", int64(m1.HeapAlloc)-int64(m0.HeapAlloc))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerLeavesMIMETablesUnloaded$", "-test.count=1")
	cmd.Env = append(os.Environ(), "VELOQ_MIME_CHILD=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	_, rest, ok := strings.Cut(string(out), "HEAPGROWTH ")
	require.True(t, ok, "%s", out)
	growth, err := strconv.Atoi(strings.Fields(rest)[0])
	require.NoError(t, err)
	require.Less(t, growth, 128<<10, "heap bytes a new Server holds")
}
