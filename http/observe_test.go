package http

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// panickingHandler is named so that the test can find it in the stack.
func panickingHandler(w *ResponseWriter, r *Request) {
	panic("observe: boom")
}

// TestPanicStackReadable: a handler's panic is logged with its stack as one
// attribute per frame, so the text handler prints no \n escapes and the
// JSON handler prints valid JSON, one record a line, both naming the
// panicking function.
func TestPanicStackReadable(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		for _, format := range []string{"text", "json"} {
			t.Run(format, func(t *testing.T) {
				var logs backendtest.Buffer
				var h slog.Handler = slog.NewTextHandler(&logs, nil)
				if format == "json" {
					h = slog.NewJSONHandler(&logs, nil)
				}
				s := startServer(t, b, HandlerFunc(panickingHandler), WithLogger(slog.New(h)))
				c, br := rawConn(t, s)
				_, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
				require.NoError(t, err)
				resp, _ := readResponse(t, br, "GET")
				require.Equal(t, StatusInternalServerError, resp.StatusCode)
				require.Eventually(t, func() bool { return strings.Contains(logs.String(), "handler panicked") },
					5*time.Second, 5*time.Millisecond)

				var line string
				sc := bufio.NewScanner(strings.NewReader(logs.String()))
				sc.Buffer(nil, 1<<20)
				for sc.Scan() {
					if strings.Contains(sc.Text(), "handler panicked") {
						line = sc.Text()
					}
				}
				require.NotEmpty(t, line)
				t.Log(line)
				if format == "text" {
					require.Contains(t, line, `panic="observe: boom"`)
					i := strings.Index(line, " stack.0=")
					require.GreaterOrEqual(t, i, 0, "no stack.0 attribute")
					stack := line[i:]
					require.NotContains(t, stack, `\n`)
					require.Contains(t, stack, "http.panickingHandler")
					return
				}
				var rec struct {
					Msg   string            `json:"msg"`
					Panic string            `json:"panic"`
					Stack map[string]string `json:"stack"`
				}
				require.NoError(t, json.Unmarshal([]byte(line), &rec))
				require.Equal(t, "observe: boom", rec.Panic)
				require.Contains(t, rec.Stack["0"], "http.panickingHandler",
					"the first frame is the function that panicked")
			})
		}
	})
}

// slowHandler blocks the loop: the stall under test.
type slowHandler struct{}

func (slowHandler) ServeHTTP(w *ResponseWriter, r *Request) {
	time.Sleep(150 * time.Millisecond)
	w.WriteString("late")
}

// TestBlockedLoopNamesRoute: the blocked-loop warning names what the user
// wrote, the route pattern a Router matched or the handler's type, not
// the server's adapter to the net layer.
func TestBlockedLoopNamesRoute(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		rt := NewRouter()
		rt.Handle("GET /slow/{id}", slowHandler{})
		for _, tc := range []struct {
			name string
			h    Handler
			want string
		}{
			{"router", rt, `callback="OnData of route GET /slow/{id}"`},
			{"handler", slowHandler{}, `callback="OnData of handler http.slowHandler"`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var logs backendtest.Buffer
				s := startServer(t, b, tc.h, WithNetOptions(vnet.WithLoops(1)),
					WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
					WithNetOptions(vnet.WithLoopConfig(vnet.Config{BlockThreshold: 20 * time.Millisecond})))
				c, br := rawConn(t, s)
				_, err := c.Write([]byte("GET /slow/7 HTTP/1.1\r\nHost: x\r\n\r\n"))
				require.NoError(t, err)
				resp, body := readResponse(t, br, "GET")
				require.Equal(t, StatusOK, resp.StatusCode)
				require.Equal(t, "late", body)
				require.Eventually(t, func() bool { return strings.Contains(logs.String(), "blocked the loop") },
					5*time.Second, 5*time.Millisecond)
				require.Contains(t, logs.String(), tc.want)
				require.NotContains(t, logs.String(), "netHandler")
			})
		}
	})
}
