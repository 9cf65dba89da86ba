//go:build linux

// Linux only: compares the io_uring and epoll backends directly.

package net

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestEchoSmall(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		s := startServer(t, b, echoHandler())
		c := dial(t, s)
		for i := 0; i < 100; i++ {
			msg := []byte("hello veloq")
			if _, err := c.Write(msg); err != nil {
				t.Fatal(err)
			}
			got, err := readFull(c, len(msg))
			if err != nil || !bytes.Equal(got, msg) {
				t.Fatalf("round %d: %q %v", i, got, err)
			}
		}
	})
}

// 1000 concurrent connections, each sending messages of random size from
// 1 B to 1 MiB, get every byte back in order.
func TestEchoConcurrentRandomSizes(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		s := startServer(t, b, echoHandler())
		conns, msgs := 1000, 2
		if testing.Short() || raceEnabled {
			conns = 300 // the race detector makes every copied byte expensive
		}
		block := make([]byte, 2<<20) // messages are random slices of one random block
		for i := range block {
			block[i] = byte(rand.Uint32())
		}
		var wg sync.WaitGroup
		errs := make(chan error, conns)
		sem := make(chan struct{}, 256) // bound client-side goroutines doing I/O at once
		for i := 0; i < conns; i++ {
			wg.Add(1)
			go func(seed uint64) {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				rng := rand.New(rand.NewPCG(seed, 7))
				c, err := net.Dial("tcp", s.Addr().String())
				if err != nil {
					errs <- err
					return
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(60 * time.Second))
				for m := 0; m < msgs; m++ {
					size := 1 + rng.IntN(1<<20)
					if rng.IntN(4) != 0 {
						size = 1 + rng.IntN(4096) // mostly small, some large
					}
					off := rng.IntN(len(block) - size + 1)
					msg := block[off : off+size]
					werr := make(chan error, 1)
					go func() { _, err := c.Write(msg); werr <- err }()
					got, err := readFull(c, size)
					if err != nil {
						errs <- err
						return
					}
					if err := <-werr; err != nil {
						errs <- err
						return
					}
					if !bytes.Equal(got, msg) {
						errs <- errMismatch
						return
					}
				}
			}(uint64(i))
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	})
}

var errMismatch = &mismatchError{}

type mismatchError struct{}

func (*mismatchError) Error() string { return "echoed bytes differ" }

// Many busy connections switch a loop to batched waits (io_uring then
// asks the kernel for several completions per wake-up, see
// uringBackend.wait; epoll pauses before its wait, see
// epollBackend.pause). When the traffic stops, a lone message on one
// connection must still be answered at once: the batch it would wait to
// fill never comes, and the wait's minimum (or the pause's end) has to
// hand it over. Every echo of the busy phase must come back intact too.
func TestBatchedWaitLoneMessage(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		if b == BackendPortable {
			t.Skip("batched waits (Config.BatchWait) are an io_uring and epoll feature; the portable backend waits in the Go runtime")
		}
		s := startServer(t, b, echoHandler(), WithLoops(1))
		const conns, maxRounds = 48, 20000
		cs := make([]net.Conn, conns)
		for i := range cs {
			cs[i] = dial(t, s)
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		errs := make(chan error, conns)
		for i, c := range cs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				msg := []byte(fmt.Sprintf("conn %02d says hello", i))
				for r := 0; r < maxRounds; r++ {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := c.Write(msg); err != nil {
						errs <- err
						return
					}
					if got, err := readFull(c, len(msg)); err != nil || !bytes.Equal(got, msg) {
						errs <- fmt.Errorf("conn %d round %d: %q, %v", i, r, got, err)
						return
					}
				}
			}()
		}
		// The busy phase must be busy enough to batch, or the lone
		// message below proves nothing.
		l := s.Loops()[0]
		activityNow := func() activity {
			got := make(chan activity, 1)
			require.NoError(t, l.Post(func() {
				switch be := l.be.(type) {
				case *uringBackend:
					got <- be.act
				case *epollBackend:
					got <- be.act
				}
			}))
			return await(t, got, "the loop did not run the post")
		}
		if a := activityNow(); a.wait == 0 {
			t.Log("kernel without IORING_FEAT_MIN_TIMEOUT: batched waits are off")
		} else {
			require.Eventually(t, func() bool {
				a := activityNow()
				return a.active/batchShare >= a.least
			}, 10*time.Second, time.Millisecond, "connections never counted active enough to batch")
		}
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		c := cs[conns/2]
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("lone")); err != nil {
			t.Fatal(err)
		}
		got, err := readFull(c, 4)
		require.NoError(t, err, "the lone message was not echoed")
		require.Equal(t, "lone", string(got))
	})
}
