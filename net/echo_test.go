package net

import (
	"bytes"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
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
