// Command gobwasnetpoll is the event-loop WebSocket peer: gobwas/ws's
// zero-copy upgrade and frame API on cloudwego/netpoll, echoing every
// message with its type on any path. netpoll calls onRequest (on its
// goroutine pool) when a connection has input, so an idle connection has
// no goroutine; onRequest upgrades a new connection, then echoes every
// frame buffered, unmasking in place. Control frames are handled: ping
// gets a pong, close is echoed and the connection closed. It prints
// "gobwasnetpoll: websocket echo on ADDR, N pollers, pid P" once
// listening and exits on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/cloudwego/netpoll"
	"github.com/gobwas/ws"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9004", "listen address")
	loops := flag.Int("loops", 1, "number of netpoll pollers")
	flag.Parse()
	if err := run(*addr, *loops); err != nil {
		fmt.Fprintln(os.Stderr, "gobwasnetpoll:", err)
		os.Exit(1)
	}
}

func run(addr string, loops int) error {
	if loops < 1 {
		return fmt.Errorf("-loops %d: want >= 1", loops)
	}
	if err := netpoll.Configure(netpoll.Config{PollerNum: loops, LoggerOutput: io.Discard}); err != nil {
		return err
	}
	ln, err := netpoll.CreateListener("tcp", addr)
	if err != nil {
		return err
	}
	loop, err := netpoll.NewEventLoop(onRequest, netpoll.WithOnPrepare(func(c netpoll.Connection) context.Context {
		return context.WithValue(context.Background(), stateKey{}, new(connState))
	}))
	if err != nil {
		return err
	}
	fmt.Printf("gobwasnetpoll: websocket echo on %s, %d pollers, GOMAXPROCS %d, pid %d\n", ln.Addr(), loops, runtime.GOMAXPROCS(0), os.Getpid())
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- loop.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err = loop.Shutdown(sctx)
	fmt.Println("gobwasnetpoll: shut down")
	return err
}

type stateKey struct{}

// connState remembers whether the handshake is done.
type connState struct{ upgraded bool }

func onRequest(ctx context.Context, c netpoll.Connection) error {
	st := ctx.Value(stateKey{}).(*connState)
	if !st.upgraded {
		// The netpoll connection is a net.Conn whose reads block until
		// input arrives: ws.Upgrade reads the request and writes 101.
		if _, err := ws.Upgrade(c); err != nil {
			return c.Close()
		}
		st.upgraded = true
	}
	r, w := c.Reader(), c.Writer()
	for r.Len() > 0 {
		h, err := ws.ReadHeader(c)
		if err != nil {
			return c.Close()
		}
		payload, err := r.Next(int(h.Length)) // a view of netpoll's buffer
		if err != nil {
			return c.Close()
		}
		if h.Masked {
			ws.Cipher(payload, h.Mask, 0)
		}
		out := ws.Header{Fin: h.Fin, OpCode: h.OpCode, Length: h.Length}
		switch h.OpCode {
		case ws.OpPing:
			out.OpCode = ws.OpPong
		case ws.OpPong:
			continue
		}
		// Copy header and payload into the writer's buffer (Malloc), so
		// nothing in it refers to the reader's memory released below.
		hb, err := w.Malloc(ws.HeaderSize(out))
		if err != nil {
			return c.Close()
		}
		ws.WriteHeader(&sliceWriter{b: hb}, out)
		pb, err := w.Malloc(len(payload))
		if err != nil {
			return c.Close()
		}
		copy(pb, payload)
		if h.OpCode == ws.OpClose {
			w.Flush()
			return c.Close()
		}
	}
	if err := r.Release(); err != nil {
		return err
	}
	return w.Flush()
}

// sliceWriter fills a preallocated slice.
type sliceWriter struct {
	b []byte
	n int
}

func (s *sliceWriter) Write(p []byte) (int, error) {
	n := copy(s.b[s.n:], p)
	s.n += n
	if n < len(p) {
		return n, io.ErrShortWrite
	}
	return n, nil
}
