//go:build linux

// Linux only: the upgrade runs under a child subreaper (PR_SET_CHILD_SUBREAPER).

package main

import (
	"bufio"
	"net"
	nethttp "net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

var startLine = regexp.MustCompile(` on (127\.0\.0\.1:\d+), backend .* pid (\d+)$`)

// SIGUSR2 restarts the binary in place: a new process serves the same
// address, the old one exits 0; HTTP and UDP modes, both backends.
func TestEchoServerUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	// The new process is the old one's child: be its reaper once the old
	// one exits, to wait for it.
	require.NoError(t, unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
	bin := filepath.Join(backendtest.TempDir(t), "echo-server")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "build: %s", out)
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		for _, mode := range []string{"http", "udp"} {
			r, w, err := os.Pipe() // not StdoutPipe: Wait would close it under the new process
			require.NoError(t, err)
			defer r.Close()
			cmd := exec.Command(bin, "-mode", mode, "-addr", "127.0.0.1:0", "-loops", "2", "-backend", string(b))
			cmd.Stdout, cmd.Stderr = w, os.Stderr
			require.NoError(t, cmd.Start())
			w.Close()
			lines := make(chan string, 64)
			go func() {
				sc := bufio.NewScanner(r)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
			}()
			started := func() (string, int) {
				t.Helper()
				for {
					select {
					case l, ok := <-lines:
						require.True(t, ok, "output ended")
						if m := startLine.FindStringSubmatch(l); m != nil {
							pid, _ := strconv.Atoi(m[2])
							return m[1], pid
						}
					case <-time.After(30 * time.Second):
						t.Fatal("no start line")
					}
				}
			}
			addr, pid := started()
			require.Equal(t, cmd.Process.Pid, pid)
			check(t, mode, addr)
			require.NoError(t, cmd.Process.Signal(syscall.SIGUSR2))
			addr2, pid2 := started()
			require.Equal(t, addr, addr2, "the same socket")
			require.NotEqual(t, pid, pid2)
			require.NoError(t, cmd.Wait(), "the old process exits 0 once the new one serves")
			check(t, mode, addr)
			require.NoError(t, unix.Kill(pid2, unix.SIGTERM))
			var ws unix.WaitStatus
			_, err = unix.Wait4(pid2, &ws, 0, nil)
			require.NoError(t, err)
			require.True(t, ws.Exited() && ws.ExitStatus() == 0, "%v", ws)
		}
	})
}

func check(t *testing.T, mode, addr string) {
	t.Helper()
	if mode == "http" {
		c := &nethttp.Client{Timeout: 10 * time.Second, Transport: &nethttp.Transport{DisableKeepAlives: true}}
		resp, err := c.Get("http://" + addr + "/")
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, 200, resp.StatusCode)
		return
	}
	c, err := net.Dial("udp", addr)
	require.NoError(t, err)
	defer c.Close()
	buf := make([]byte, 64)
	require.Eventually(t, func() bool { // a datagram may be lost: ask again
		c.Write([]byte("veloq"))
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, err := c.Read(buf)
		return err == nil && string(buf[:n]) == "veloq"
	}, 10*time.Second, time.Millisecond)
}
