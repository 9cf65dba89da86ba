// Command gnethttp is the gnet peer for HTTP benchmarks: GET / answers
// "Hello, World!" as text/plain on github.com/panjf2000/gnet/v2, -loops
// event loops (default 1), keep-alive, pipelined answers written together.
//
// gnet has no HTTP server. Like gnet's own HTTP example, this peer only
// frames requests (the head ends at the first empty line, a Content-Length
// body is skipped; see frame) and answers every one with the same fixed
// response; it parses neither method nor target nor headers beyond that.
// It is an upper bound for an event-loop HTTP server in Go, not a server
// that a full HTTP/1.1 parser can be compared with as equals. A framing
// error (head over 16 KiB, body over 1 MiB, a bad Content-Length, any
// Transfer-Encoding) gets 400 and the connection is closed; so is one whose
// request says "Connection: close", after its answer.
//
// It prints "gnethttp: http on ADDR, N loops, GOMAXPROCS G, pid P" once
// listening and exits on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/veloq/veloq/bench/internal/gnetlog"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8082", "listen address")
	loops := flag.Int("loops", 1, "number of gnet event loops")
	flag.Parse()
	if err := run(*addr, *loops); err != nil {
		fmt.Fprintln(os.Stderr, "gnethttp:", err)
		os.Exit(1)
	}
}

func run(addr string, loops int) error {
	if loops < 1 {
		return fmt.Errorf("-loops %d: want >= 1", loops)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := &httpServer{addr: addr, loops: loops, booted: make(chan gnet.Engine, 1)}
	errc := make(chan error, 1)
	go func() {
		errc <- gnet.Run(s, "tcp://"+addr, gnet.WithNumEventLoop(loops), gnet.WithLogger(gnetlog.New(nil)))
	}()
	var eng gnet.Engine
	select {
	case err := <-errc:
		return err
	case eng = <-s.booted:
	}
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := eng.Stop(sctx)
	<-errc
	fmt.Println("gnethttp: shut down")
	return err
}

const (
	hello      = "Hello, World!"
	badRequest = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
)

// httpServer is the gnet event handler. Its callbacks run on every loop,
// so it holds nothing a connection writes: each connection's output
// buffer is its context, and the cached head is shared atomically.
type httpServer struct {
	gnet.BuiltinEventEngine
	addr   string
	loops  int
	booted chan gnet.Engine
	head   atomic.Pointer[cachedHead]
}

// cachedHead is the response up to the body, remade once a second for its
// Date header.
type cachedHead struct {
	sec int64
	b   []byte
}

// responseHead returns the response's status line and headers for now.
func (s *httpServer) responseHead(now time.Time) []byte {
	if h := s.head.Load(); h != nil && h.sec == now.Unix() {
		return h.b
	}
	b := []byte("HTTP/1.1 200 OK\r\nServer: gnet\r\nContent-Type: text/plain\r\nDate: ")
	b = now.UTC().AppendFormat(b, http.TimeFormat)
	b = fmt.Appendf(b, "\r\nContent-Length: %d\r\n\r\n", len(hello))
	s.head.Store(&cachedHead{sec: now.Unix(), b: b})
	return b
}

// OnBoot runs once the listener is bound: the readiness line goes out here.
func (s *httpServer) OnBoot(eng gnet.Engine) gnet.Action {
	fmt.Printf("gnethttp: http on %s, %d loops, GOMAXPROCS %d, pid %d\n", s.addr, s.loops, runtime.GOMAXPROCS(0), os.Getpid())
	s.booted <- eng
	return gnet.None
}

// OnOpen gives the connection its output buffer.
func (s *httpServer) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	c.SetContext(new(connOut))
	return nil, gnet.None
}

// connOut is a connection's output buffer, reused for every batch.
type connOut struct{ b []byte }

// OnTraffic answers every complete request buffered, in one write, and
// leaves a partial one in gnet's buffer for the next call.
func (s *httpServer) OnTraffic(c gnet.Conn) gnet.Action {
	in, err := c.Peek(-1)
	if err != nil {
		return gnet.Close
	}
	out := c.Context().(*connOut)
	out.b = out.b[:0]
	head := s.responseHead(time.Now())
	used, action := 0, gnet.None
	for used < len(in) {
		req, ok, err := frame(in[used:])
		if err != nil {
			out.b = append(out.b, badRequest...)
			action = gnet.Close
			break
		}
		if !ok {
			break
		}
		used += req.size
		out.b = append(out.b, head...)
		out.b = append(out.b, hello...)
		if req.close {
			action = gnet.Close
			break
		}
	}
	if _, err := c.Discard(used); err != nil {
		return gnet.Close
	}
	if len(out.b) > 0 {
		if _, err := c.Write(out.b); err != nil {
			return gnet.Close
		}
	}
	return action
}
