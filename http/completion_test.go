package http

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	nethttp "net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/executor"
	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// completions collects what the completion hook reports, copied, since
// the server reuses its Completion.
type completions chan Completion

func newCompletions() completions { return make(completions, 64) }

func (cc completions) hook(c *Completion) { cc <- *c }

// next waits for the next report.
func (cc completions) next(t *testing.T) Completion {
	t.Helper()
	select {
	case c := <-cc:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no completion reported")
		return Completion{}
	}
}

// rawExchange sends req on a new connection and reads the whole answer
// until the server closes (req asks it to), returning the bytes read.
func rawExchange(t *testing.T, s *Server, req string) string {
	t.Helper()
	c, _ := rawConn(t, s)
	_, err := c.Write([]byte(req))
	require.NoError(t, err)
	got, err := io.ReadAll(c)
	require.NoError(t, err)
	return string(got)
}

// completionHandlers are the handler styles, each answering 201 with
// "created" and a header, on pools made for the test.
func completionHandlers(t *testing.T) map[string]Handler {
	pool := executor.NewPool(executor.WithWorkers(2))
	blocking := executor.NewBlockingPool()
	t.Cleanup(func() {
		_ = pool.Shutdown(context.Background())
		_ = blocking.Shutdown(context.Background())
	})
	fast := HandlerFunc(func(w *ResponseWriter, r *Request) {
		w.Header().Set("X-Style", "fast")
		w.WriteHeader(StatusCreated)
		w.WriteString("created")
	})
	std := FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
		w.Header().Set("X-Style", "std")
		w.WriteHeader(StatusCreated)
		io.WriteString(w, "created")
	}))
	return map[string]Handler{
		"inline": fast, "offloaded": Offloaded(pool, fast),
		"blocking": OffloadedBlocking(blocking, fast), "std": std,
	}
}

// Every handler style reports one completion per request over HTTP/1.1,
// with the bytes that crossed the wire each way, exactly.
func TestCompletionHandlerStylesHTTP1(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		for name, h := range completionHandlers(t) {
			t.Run(name, func(t *testing.T) {
				cc := newCompletions()
				s := startServer(t, b, h, WithCompletion(cc.hook))
				req := "POST /things?x=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello"
				got := rawExchange(t, s, req)
				require.Contains(t, got, "HTTP/1.1 201 ")
				c := cc.next(t)
				require.Equal(t, "POST", c.Method)
				require.Equal(t, "/things?x=1", c.Target)
				require.Equal(t, "", c.Route)
				require.Equal(t, "HTTP/1.1", c.Proto)
				require.Equal(t, StatusCreated, c.Status)
				require.Equal(t, int64(len(req)), c.BytesIn)
				require.Equal(t, int64(len(got)), c.BytesOut)
				require.True(t, c.Completed)
				require.NotNil(t, c.RemoteAddr)
				require.Empty(t, cc, "one completion per request")
			})
		}
	})
}

// Every handler style reports its HTTP/2 streams, with the protocol.
func TestCompletionHandlerStylesHTTP2(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		for name, h := range completionHandlers(t) {
			t.Run(name, func(t *testing.T) {
				cc := newCompletions()
				s := startServer(t, b, h, WithCompletion(cc.hook))
				cl := h2Client(nil)
				defer cl.CloseIdleConnections()
				resp, err := cl.Post("http://"+s.Addr().String()+"/h2?y", "text/plain", strings.NewReader("hello"))
				require.NoError(t, err)
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				require.Equal(t, 2, resp.ProtoMajor)
				require.Equal(t, "created", string(body))
				c := cc.next(t)
				require.Equal(t, "HTTP/2", c.Proto)
				require.Equal(t, "POST", c.Method)
				require.Equal(t, "/h2?y", c.Target)
				require.Equal(t, StatusCreated, c.Status)
				require.True(t, c.Completed)
				// HEADERS (9 + block) and DATA (9 + 5) at least; the
				// answer's HEADERS and DATA with "created".
				require.GreaterOrEqual(t, c.BytesIn, int64(9+1+9+5))
				require.GreaterOrEqual(t, c.BytesOut, int64(9+1+9+len("created")))
			})
		}
	})
}

// The case of issue 33: an Offloaded handler that answers 503 after
// 200 ms is reported with its status and its time, not the loop's part.
func TestCompletionOffloadedSlow503(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		pool := executor.NewPool(executor.WithWorkers(1))
		t.Cleanup(func() { _ = pool.Shutdown(context.Background()) })
		slow := Offloaded(pool, HandlerFunc(func(w *ResponseWriter, r *Request) {
			time.Sleep(200 * time.Millisecond) // the handler's work under test
			w.WriteHeader(StatusServiceUnavailable)
		}))
		cc := newCompletions()
		s := startServer(t, b, slow, WithCompletion(cc.hook))
		resp, err := newClient().Get("http://" + s.Addr().String() + "/slow")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, StatusServiceUnavailable, resp.StatusCode)
		c := cc.next(t)
		require.Equal(t, StatusServiceUnavailable, c.Status)
		require.GreaterOrEqual(t, c.Duration, 200*time.Millisecond)
		require.Less(t, c.Duration, 10*time.Second)
		require.True(t, c.Completed)
	})
}

// A panic is reported as the 500 the client got; an aborting panic
// (ErrAbortHandler) as an answer that did not complete. Inline and
// offloaded alike.
func TestCompletionPanics(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		pool := executor.NewPool(executor.WithWorkers(1))
		t.Cleanup(func() { _ = pool.Shutdown(context.Background()) })
		h := HandlerFunc(func(w *ResponseWriter, r *Request) {
			if string(r.Path) == "/abort" {
				panic(nethttp.ErrAbortHandler)
			}
			panic("completion: boom")
		})
		for name, h := range map[string]Handler{"inline": h, "offloaded": Offloaded(pool, h)} {
			t.Run(name, func(t *testing.T) {
				cc := newCompletions()
				s := startServer(t, b, h, WithCompletion(cc.hook), WithLogger(slog.New(slog.DiscardHandler)))
				got := rawExchange(t, s, "GET /boom HTTP/1.1\r\nHost: x\r\n\r\n")
				require.True(t, strings.HasPrefix(got, "HTTP/1.1 500 "), got)
				c := cc.next(t)
				require.Equal(t, StatusInternalServerError, c.Status)
				require.Equal(t, int64(len(got)), c.BytesOut)
				require.True(t, c.Completed)

				got = rawExchange(t, s, "GET /abort HTTP/1.1\r\nHost: x\r\n\r\n")
				require.Empty(t, got)
				c = cc.next(t)
				require.Equal(t, "/abort", c.Target)
				require.Equal(t, 0, c.Status)
				require.False(t, c.Completed)
			})
		}
	})
}

// A streamed answer cut by a panic after its head went out: the status
// sent, and not completed.
func TestCompletionCutStream(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		h := FromStd(nethttp.HandlerFunc(func(w nethttp.ResponseWriter, r *nethttp.Request) {
			w.WriteHeader(StatusOK)
			io.WriteString(w, "partial")
			w.(nethttp.Flusher).Flush()
			panic("completion: cut")
		}))
		cc := newCompletions()
		s := startServer(t, b, h, WithCompletion(cc.hook), WithLogger(slog.New(slog.DiscardHandler)))
		got := rawExchange(t, s, "GET /cut HTTP/1.1\r\nHost: x\r\n\r\n")
		require.Contains(t, got, "partial")
		c := cc.next(t)
		require.Equal(t, StatusOK, c.Status)
		require.False(t, c.Completed)
		require.Equal(t, int64(len(got)), c.BytesOut)
	})
}

// The Router's pattern names the route, over both protocols; a path no
// pattern matches has none.
func TestCompletionRoute(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		r := NewRouter()
		r.HandleFunc("GET /users/{id}", func(w *ResponseWriter, r *Request) { w.WriteString("user") })
		cc := newCompletions()
		s := startServer(t, b, r, WithCompletion(cc.hook))
		url := "http://" + s.Addr().String()
		for _, cl := range []*nethttp.Client{newClient(), h2Client(nil)} {
			resp, err := cl.Get(url + "/users/42")
			require.NoError(t, err)
			resp.Body.Close()
			c := cc.next(t)
			require.Equal(t, "GET /users/{id}", c.Route)
			require.Equal(t, "/users/42", c.Target)
			require.Equal(t, StatusOK, c.Status)

			resp, err = cl.Get(url + "/nowhere")
			require.NoError(t, err)
			resp.Body.Close()
			c = cc.next(t)
			require.Equal(t, "", c.Route)
			require.Equal(t, StatusNotFound, c.Status)
		}
	})
}

// A request the parser rejects, and one over the body budget, are
// reported with the status the server answered.
func TestCompletionServerAnswers(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		cc := newCompletions()
		s := startServer(t, b, HandlerFunc(testHandler), WithCompletion(cc.hook), WithMaxBufferedBodyBytes(1024))
		got := rawExchange(t, s, "GET /a b c HTTP/1.1\r\nHost: x\r\n\r\n")
		require.True(t, strings.HasPrefix(got, "HTTP/1.1 400 "), got)
		c := cc.next(t)
		require.Equal(t, StatusBadRequest, c.Status)
		require.Equal(t, "", c.Method)

		c1, br := rawConn(t, s)
		_, err := c1.Write([]byte("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n" + strings.Repeat("x", 8000)))
		require.NoError(t, err)
		resp, _ := readResponse(t, br, "POST")
		require.Equal(t, StatusServiceUnavailable, resp.StatusCode)
		c = cc.next(t)
		require.Equal(t, "POST", c.Method)
		require.Equal(t, StatusServiceUnavailable, c.Status)
		require.True(t, c.Completed)
	})
}

// The access log writes one JSON record a request with every field.
func TestAccessLogJSON(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var logs backendtest.Buffer
		l := slog.New(slog.NewJSONHandler(&logs, nil))
		r := NewRouter()
		r.HandleFunc("GET /hello/{name}", func(w *ResponseWriter, r *Request) { w.WriteString("hi") })
		r.HandleFunc("GET /fail", func(w *ResponseWriter, r *Request) { w.WriteHeader(StatusBadGateway) })
		s := startServer(t, b, r, WithCompletion(AccessLog(l)))
		cl := newClient()
		for _, p := range []string{"/hello/ann", "/fail"} {
			resp, err := cl.Get("http://" + s.Addr().String() + p)
			require.NoError(t, err)
			resp.Body.Close()
		}
		require.Eventually(t, func() bool { return strings.Count(logs.String(), "\n") == 2 }, 5*time.Second, time.Millisecond)

		type record struct {
			Level     string `json:"level"`
			Msg       string `json:"msg"`
			Method    string `json:"method"`
			Route     string `json:"route"`
			Target    string `json:"target"`
			Proto     string `json:"proto"`
			Status    int    `json:"status"`
			BytesIn   int64  `json:"bytes_in"`
			BytesOut  int64  `json:"bytes_out"`
			Duration  int64  `json:"duration"`
			Remote    string `json:"remote"`
			Completed bool   `json:"completed"`
		}
		var recs []record
		sc := bufio.NewScanner(strings.NewReader(logs.String()))
		for sc.Scan() {
			var rec record
			require.NoError(t, json.Unmarshal(sc.Bytes(), &rec), sc.Text())
			recs = append(recs, rec)
		}
		require.Len(t, recs, 2)
		ok := recs[0]
		require.Equal(t, "INFO", ok.Level)
		require.Equal(t, "http request", ok.Msg)
		require.Equal(t, "GET", ok.Method)
		require.Equal(t, "GET /hello/{name}", ok.Route)
		require.Equal(t, "/hello/ann", ok.Target)
		require.Equal(t, "HTTP/1.1", ok.Proto)
		require.Equal(t, 200, ok.Status)
		require.Positive(t, ok.BytesIn)
		require.Positive(t, ok.BytesOut)
		require.GreaterOrEqual(t, ok.Duration, int64(0))
		require.True(t, strings.HasPrefix(ok.Remote, "127.0.0.1:"), ok.Remote)
		require.True(t, ok.Completed)
		require.Equal(t, "WARN", recs[1].Level)
		require.Equal(t, 502, recs[1].Status)
	})
}

// A hook that panics is logged, and the server goes on serving.
func TestCompletionHookPanic(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		var logs backendtest.Buffer
		calls := newCompletions()
		hook := ChainCompletion(calls.hook, nil, func(*Completion) { panic("hook: boom") })
		s := startServer(t, b, HandlerFunc(testHandler), WithCompletion(hook), WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		cl := newClient()
		for i := range 2 {
			resp, err := cl.Get(fmt.Sprintf("http://%s/?%d", s.Addr(), i))
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, 200, resp.StatusCode)
			require.Equal(t, fmt.Sprintf("/?%d", i), calls.next(t).Target)
		}
		require.Eventually(t, func() bool { return strings.Contains(logs.String(), "completion hook panicked") }, 5*time.Second, time.Millisecond)
	})
}

// A client that goes away while an offloaded handler works: over HTTP/1
// a reset closes the connection, over HTTP/2 the client resets the
// stream. Either way the request is reported once, not completed.
func TestCompletionClientGone(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		if b == vnet.BackendPortable {
			backendtest.SkipUnderWine(t, "a reset that arrived before the read reads as EOF")
		}
		pool := executor.NewPool(executor.WithWorkers(2))
		t.Cleanup(func() { _ = pool.Shutdown(context.Background()) })
		started := make(chan struct{}, 2)
		h := Offloaded(pool, HandlerFunc(func(w *ResponseWriter, r *Request) {
			started <- struct{}{}
			<-w.Context().Done() // until the client is gone
		}))
		cc := newCompletions()
		s := startServer(t, b, h, WithCompletion(cc.hook))

		c, _ := rawConn(t, s)
		_, err := c.Write([]byte("GET /gone HTTP/1.1\r\nHost: x\r\n\r\n"))
		require.NoError(t, err)
		<-started
		require.NoError(t, c.(*net.TCPConn).SetLinger(0))
		require.NoError(t, c.Close()) // RST
		got := cc.next(t)
		require.Equal(t, "/gone", got.Target)
		require.Equal(t, "HTTP/1.1", got.Proto)
		require.False(t, got.Completed)
		require.Equal(t, 0, got.Status)

		cl := h2Client(nil)
		defer cl.CloseIdleConnections()
		ctx, cancel := context.WithCancel(context.Background())
		req, err := nethttp.NewRequestWithContext(ctx, "GET", "http://"+s.Addr().String()+"/gone2", nil)
		require.NoError(t, err)
		errc := make(chan error, 1)
		go func() {
			resp, err := cl.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
		<-started
		cancel() // RST_STREAM CANCEL
		require.Error(t, <-errc)
		got = cc.next(t)
		require.Equal(t, "/gone2", got.Target)
		require.Equal(t, "HTTP/2", got.Proto)
		require.False(t, got.Completed)
		select {
		case extra := <-cc:
			t.Fatalf("a second report: %+v", extra)
		default:
		}
	})
}
