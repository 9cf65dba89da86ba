// Command gnetecho is a TCP echo server on github.com/panjf2000/gnet/v2, an
// event-loop network library whose callbacks run on the loop's goroutine.
// It runs -loops event loops (default 1); OnTraffic writes back everything
// readable. It prints "gnetecho: tcp echo on ADDR, N loops, GOMAXPROCS G,
// pid P" once listening and exits on SIGINT or SIGTERM.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"

	"github.com/veloq/veloq/bench/internal/gnetlog"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:9005", "listen address")
	loops := flag.Int("loops", 1, "number of gnet event loops")
	flag.Parse()
	if err := run(*addr, *loops); err != nil {
		fmt.Fprintln(os.Stderr, "gnetecho:", err)
		os.Exit(1)
	}
}

func run(addr string, loops int) error {
	if loops < 1 {
		return fmt.Errorf("-loops %d: want >= 1", loops)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := &echoServer{addr: addr, loops: loops, booted: make(chan gnet.Engine, 1)}
	errc := make(chan error, 1)
	go func() {
		errc <- gnet.Run(s, "tcp://"+addr,
			gnet.WithNumEventLoop(loops),
			gnet.WithReusePort(false),
			gnet.WithLogger(gnetlog.New(nil)))
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
	fmt.Println("gnetecho: shut down")
	return err
}

// echoServer is the gnet event handler.
type echoServer struct {
	gnet.BuiltinEventEngine
	addr   string
	loops  int
	booted chan gnet.Engine
}

// OnBoot runs once the listener is bound: the readiness line goes out here.
func (s *echoServer) OnBoot(eng gnet.Engine) gnet.Action {
	fmt.Printf("gnetecho: tcp echo on %s, %d loops, GOMAXPROCS %d, pid %d\n", s.addr, s.loops, runtime.GOMAXPROCS(0), os.Getpid())
	s.booted <- eng
	return gnet.None
}

// OnTraffic echoes everything buffered. Next(-1) is a view of gnet's
// inbound buffer; Write copies what the socket does not take at once.
func (s *echoServer) OnTraffic(c gnet.Conn) gnet.Action {
	in, err := c.Next(-1)
	if err != nil {
		return gnet.Close
	}
	if _, err := c.Write(in); err != nil {
		return gnet.Close
	}
	return gnet.None
}
