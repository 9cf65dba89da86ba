//go:build linux

// Linux only: creates sockets with Linux's SOCK_CLOEXEC/SOCK_NONBLOCK flags and counts descriptors in /proc.

package net

import (
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// When accept fails with EMFILE the loop backs off instead of spinning,
// keeps serving open connections, and accepts the waiting connections once
// descriptors are free again.
func TestAcceptEMFILEBackoff(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		s := startServer(t, b, echoHandler(), WithLoops(1))
		good := dial(t, s)
		echoOnce := func(msg string) error {
			good.SetDeadline(time.Now().Add(5 * time.Second))
			if _, err := good.Write([]byte(msg)); err != nil {
				return err
			}
			_, err := readFull(good, len(msg))
			return err
		}
		if err := echoOnce("before"); err != nil {
			t.Fatal(err)
		}
		waitConns(t, s, 1)

		// Client sockets are made now: connecting them later needs no fd.
		const waiting = 5
		var clients []int
		for i := 0; i < waiting; i++ {
			fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
			if err != nil {
				t.Fatal(err)
			}
			clients = append(clients, fd)
		}
		defer func() {
			for _, fd := range clients {
				unix.Close(fd)
			}
		}()
		sa := &unix.SockaddrInet4{Port: s.Addr().(*net.TCPAddr).Port, Addr: [4]byte{127, 0, 0, 1}}

		// Exhaust the descriptor table up to the current limit. (Lowering
		// the limit instead would not do: io_uring's accept reads
		// RLIMIT_NOFILE when the request is prepared, not when it runs.)
		var fillers []int
		release := func() {
			for _, fd := range fillers {
				unix.Close(fd)
			}
			fillers = nil
		}
		defer release()
		for {
			fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				if err != unix.EMFILE {
					release()
					t.Fatalf("filling the fd table: %v", err)
				}
				break
			}
			fillers = append(fillers, fd)
		}
		before := s.Stats()[0]
		for _, fd := range clients {
			if err := unix.Connect(fd, sa); err != nil {
				release()
				t.Fatalf("connect: %v", err)
			}
		}
		// Wait for the back-off to run a few rounds (10, 20, 40 ms).
		require.Eventually(t, func() bool { return s.Stats()[0].AcceptErrs >= before.AcceptErrs+3 }, 20*time.Second, time.Millisecond,
			"no accept errors counted while out of descriptors")
		after := s.Stats()[0]
		// The open connection is still served while accept fails.
		goodErr := echoOnce("during")
		release()
		if goodErr != nil {
			t.Fatalf("open connection not served during EMFILE: %v", goodErr)
		}
		if after.AcceptErrs == before.AcceptErrs {
			t.Fatal("no accept error counted while out of descriptors")
		}
		// Backing off: three failed accepts took a handful of iterations
		// (10 ms doubling), not a spin of thousands.
		if it := after.Iterations - before.Iterations; it > 2000 {
			t.Fatalf("%d loop iterations for three EMFILE retries: spinning", it)
		}
		waitConns(t, s, 1+waiting)
		t.Logf("accept errors %d, iterations %d during EMFILE", after.AcceptErrs-before.AcceptErrs, after.Iterations-before.Iterations)
	})
}
