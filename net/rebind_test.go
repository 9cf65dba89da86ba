//go:build unix

package net

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rebindChildEnv makes the test binary a server for TestRebindAfterKill:
// its value is the backend.
const rebindChildEnv = "VELOQ_TEST_REBIND_CHILD"

// A server killed with SIGKILL leaves its port free by the time it is
// reaped, so a restart can bind it at once, on both backends. On io_uring
// a multishot accept in flight held a reference to the listening socket's
// file: the process's exit closed its descriptor, but the socket stayed
// in LISTEN until the ring's teardown, deferred to kernel workqueues,
// dropped that reference 4–25 ms after the reap, and a restart in that
// window failed with EADDRINUSE (19 tries in 20). The ring now polls an
// epoll set holding the listener instead, which pins only the epoll set.
func TestRebindAfterKill(t *testing.T) {
	if b := os.Getenv(rebindChildEnv); b != "" {
		rebindChild(Backend(b))
		return
	}
	if testing.Short() {
		t.Skip("starts child processes")
	}
	forEachBackend(t, func(t *testing.T, b Backend) {
		const tries = 10
		failed := 0
		for range tries {
			addr := startKillable(t, b)
			// The server answers: its accept is armed, and the connection
			// stays open across the kill, as a restart under load has them
			// (the killed server's end holds the port too, but not in
			// LISTEN, so it does not stop a bind with SO_REUSEADDR).
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			_, err = c.Write([]byte("x"))
			require.NoError(t, err)
			_, err = readFull(c, 1)
			require.NoError(t, err)
			killAndReap(t)
			ln, err := net.Listen("tcp", addr)
			c.Close()
			if err != nil {
				require.ErrorIs(t, err, syscall.EADDRINUSE)
				failed++
				continue
			}
			ln.Close()
		}
		require.Zero(t, failed, "of %d restarts, %d found the killed server's port still taken", tries, failed)
	})
}

// killable is the current child of TestRebindAfterKill.
var killable *exec.Cmd

// startKillable starts the test binary as a server on backend b and
// returns the address it listens on.
func startKillable(t *testing.T, b Backend) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestRebindAfterKill$", "-test.count=1")
	cmd.Env = append(os.Environ(), rebindChildEnv+"="+string(b))
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	killable = cmd
	t.Cleanup(func() {
		if killable != nil {
			killAndReap(t)
		}
	})
	r := bufio.NewReader(out)
	for {
		line, err := r.ReadString('\n')
		require.NoError(t, err, "the child ended before listening")
		if addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on "); ok {
			return addr
		}
	}
}

func killAndReap(t *testing.T) {
	t.Helper()
	require.NoError(t, killable.Process.Signal(syscall.SIGKILL))
	err := killable.Wait()
	killable = nil
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, syscall.SIGKILL, ee.Sys().(syscall.WaitStatus).Signal())
}

// rebindChild serves an echo on a free loopback port with two loops (one
// SO_REUSEPORT listener each), says where, and waits to be killed.
func rebindChild(b Backend) {
	s, err := Listen("tcp", "127.0.0.1:0", echoHandler(), WithBackend(b), WithLoops(2))
	if err != nil {
		fmt.Fprintln(os.Stderr, "rebind child:", err)
		os.Exit(2)
	}
	fmt.Printf("listening on %s\n", s.Addr())
	select {}
}
