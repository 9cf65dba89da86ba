//go:build unix

package net_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"sync/atomic"
	"time"

	vnet "github.com/veloq/veloq/net"
)

// relayLimit bounds the bytes a relay queues toward one side.
const relayLimit = 64 << 10

// relay moves src's input to dst's output, paced by dst: it queues no
// more than relayLimit toward dst, and what does not fit stays in src,
// whose reading pauses until dst has sent half of the limit. It returns
// the bytes queued on dst afterwards.
func relay(src, dst *vnet.Conn) int {
	if n := min(src.Buffered(), relayLimit-dst.OutputBuffered()); n > 0 {
		if _, err := src.ForwardTo(dst, n); err != nil {
			src.Abort(err)
			return 0
		}
	}
	queued := dst.OutputBuffered()
	if src.Buffered() > 0 || queued >= relayLimit {
		src.PauseRead()
		dst.OnDrain(relayLimit/2, func() {
			if !src.Closed() {
				src.ResumeRead() // shows the input left in src first
			}
		})
	}
	return queued
}

// A relay paces itself: the loop's water marks stop reading from the
// connection whose output is large, which for a relay is the wrong side
// (the output is fed by the other connection), so a relay turns them off
// and pauses the source instead. Here every client is relayed to an echo
// backend dialled from the client's own loop; 1 MiB goes through while
// no more than relayLimit ever waits toward either side.
func ExampleConn_ForwardTo() {
	backend, err := vnet.Listen("tcp", "127.0.0.1:0", &vnet.HandlerFuncs{Data: func(c *vnet.Conn) {
		b, _ := c.Next(-1)
		c.Write(b)
	}}, vnet.WithLoops(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer backend.Shutdown(context.Background())

	// The most ever queued toward one side: written on the relay's one
	// loop, read here at the end.
	var peak atomic.Int64
	note := func(queued int) {
		if int64(queued) > peak.Load() {
			peak.Store(int64(queued))
		}
	}
	front := &vnet.HandlerFuncs{
		Open: func(client *vnet.Conn) {
			client.SetWriteWaterMarks(0, 0) // the relay bounds its output itself
			client.PauseRead()              // until the backend is connected
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel() // on the loop, Dial reads the deadline and returns
			b, err := client.Loop().Dial(ctx, "tcp", backend.Addr().String(), &vnet.HandlerFuncs{
				Open: func(b *vnet.Conn) {
					b.SetWriteWaterMarks(0, 0)
					client.ResumeRead()
				},
				Data:  func(b *vnet.Conn) { note(relay(b, client)) },
				Close: func(b *vnet.Conn, err error) { client.Close() },
			})
			if err != nil {
				client.Abort(err)
				return
			}
			client.SetValue(b)
		},
		Data: func(client *vnet.Conn) { note(relay(client, client.Value().(*vnet.Conn))) },
		Close: func(client *vnet.Conn, err error) {
			if b, ok := client.Value().(*vnet.Conn); ok {
				b.Close()
			}
		},
	}
	srv, err := vnet.Listen("tcp", "127.0.0.1:0", front, vnet.WithLoops(1))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer srv.Shutdown(context.Background())

	c, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	payload := make([]byte, 1<<20)
	go c.Write(payload)
	n, err := io.CopyN(io.Discard, c, int64(len(payload)))
	fmt.Println("relayed:", n, err)
	fmt.Println("queued at most relayLimit:", peak.Load() <= relayLimit)
	// Output:
	// relayed: 1048576 <nil>
	// queued at most relayLimit: true
}
