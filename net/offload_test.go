package net

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/veloq/veloq/executor"
	"github.com/veloq/veloq/internal/backendtest"
)

func newPool(t *testing.T) *executor.Pool {
	p := executor.NewPool(executor.WithWorkers(2))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Shutdown(ctx)
	})
	return p
}

// Offloaded work comes back on the connection's own loop, and pipelined
// requests are answered in order although each one leaves the loop.
func TestOffloadResumesOnOwnLoopInOrder(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		p := newPool(t)
		wrongLoop := make(chan string, 1)
		h := &HandlerFuncs{Data: func(c *Conn) {
			in, _ := c.Peek(-1)
			i := indexByte(in, '\n')
			if i < 0 {
				return
			}
			line := string(in[:i])
			c.Discard(i + 1)
			openLoop := c.Value().(int)
			Offload(context.Background(), p, c, func(context.Context) (int, error) {
				n, err := strconv.Atoi(line)
				return n * 2, err
			}, func(c *Conn, v int, err error) {
				if !c.Loop().InLoop() || c.Loop().ID() != openLoop {
					select {
					case wrongLoop <- fmt.Sprintf("continuation off loop %d", openLoop):
					default:
					}
				}
				if err != nil {
					c.Close()
					return
				}
				c.Write([]byte(strconv.Itoa(v) + "\n"))
			})
		}, Open: func(c *Conn) { c.SetValue(c.Loop().ID()) }}
		s := startServer(t, b, h)
		c := dial(t, s)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		const n = 500
		go func() {
			w := bufio.NewWriter(c)
			for i := 0; i < n; i++ {
				fmt.Fprintf(w, "%d\n", i) // pipelined: many requests per read
			}
			w.Flush()
		}()
		sc := bufio.NewScanner(c)
		for i := 0; i < n; i++ {
			if !sc.Scan() {
				t.Fatalf("after %d replies: %v", i, sc.Err())
			}
			if sc.Text() != strconv.Itoa(2*i) {
				t.Fatalf("reply %d = %q, want %d: out of order", i, sc.Text(), 2*i)
			}
		}
		select {
		case msg := <-wrongLoop:
			t.Fatal(msg)
		default:
		}
	})
}

// A connection reset while its work runs: the continuation sees
// ErrClosed and does not write to the dead connection.
func TestOffloadAfterClose(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		p := newPool(t)
		release := make(chan struct{})
		result := make(chan error, 1)
		h := &HandlerFuncs{Data: func(c *Conn) {
			c.Discard(c.Buffered())
			Offload(context.Background(), p, c, func(context.Context) (string, error) {
				<-release
				return "late", nil
			}, func(c *Conn, v string, err error) {
				_, werr := c.Write([]byte(v))
				if werr == nil {
					err = errors.New("write to a closed connection succeeded")
				}
				result <- err
			})
		}}
		if b == BackendPortable {
			backendtest.SkipUnderWine(t, "a reset that arrived before the read reads as EOF")
		}
		s := startServer(t, b, h, WithLoops(1))
		c := dial(t, s)
		c.Write([]byte("go"))
		waitConns(t, s, 1)
		c.(*net.TCPConn).SetLinger(0)
		c.Close() // RST
		waitConns(t, s, 0)
		close(release)
		err := await(t, result, "continuation never ran")
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("continuation error %v, want ErrClosed", err)
		}
	})
}

// The blocking pool's overload reaches the continuation as ErrOverloaded.
func TestOffloadBlockingOverload(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		bp := executor.NewBlockingPool(executor.WithMaxGoroutines(1), executor.WithQueueSize(1))
		defer bp.Shutdown(context.Background())
		hold := make(chan struct{})
		defer close(hold)
		errs := make(chan error, 8)
		h := &HandlerFuncs{Data: func(c *Conn) {
			c.Discard(c.Buffered())
			OffloadBlocking(context.Background(), bp, c, func(context.Context) (int, error) {
				<-hold
				return 1, nil
			}, func(c *Conn, _ int, err error) {
				if err != nil {
					errs <- err
				}
			})
		}}
		s := startServer(t, b, h, WithLoops(1))
		for i := 0; i < 4; i++ {
			c := dial(t, s)
			c.Write([]byte("x"))
		}
		err := await(t, errs, "a full blocking pool accepted everything")
		if !errors.Is(err, executor.ErrOverloaded) {
			t.Fatalf("got %v, want ErrOverloaded", err)
		}
	})
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
