// Command gnetudp is gnet's UDP echo (github.com/panjf2000/gnet/v2), for
// comparison with veloq's -mode udp: its event loops read a datagram,
// OnTraffic writes it back to the sender. It prints "gnetudp: udp echo on
// ADDR, pid N" once listening and exits on SIGINT or SIGTERM.
//
// -loops sets gnet's event loops (with more than one, gnet opens one
// SO_REUSEPORT socket per loop).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/panjf2000/gnet/v2"
)

type echo struct {
	gnet.BuiltinEventEngine
	addr   string
	eng    gnet.Engine
	echoed atomic.Uint64
}

func (e *echo) OnBoot(eng gnet.Engine) gnet.Action {
	e.eng = eng
	fmt.Printf("gnetudp: udp echo on %s, pid %d\n", e.addr, os.Getpid())
	return gnet.None
}

func (e *echo) OnTraffic(c gnet.Conn) gnet.Action {
	buf, _ := c.Next(-1)
	if _, err := c.Write(buf); err == nil {
		e.echoed.Add(1)
	}
	return gnet.None
}

func main() {
	addr := flag.String("addr", "127.0.0.1:9003", "listen address")
	loops := flag.Int("loops", 1, "gnet event loops")
	flag.Parse()
	e := &echo{addr: *addr}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = e.eng.Stop(sctx)
	}()
	err := gnet.Run(e, "udp://"+*addr,
		gnet.WithMulticore(*loops > 1), gnet.WithNumEventLoop(*loops), gnet.WithReusePort(*loops > 1),
		gnet.WithSocketRecvBuffer(4<<20), gnet.WithSocketSendBuffer(4<<20))
	if err != nil {
		fmt.Fprintln(os.Stderr, "gnetudp:", err)
		os.Exit(1)
	}
	fmt.Printf("gnetudp: %d datagrams echoed\n", e.echoed.Load())
}
