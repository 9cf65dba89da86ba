package main

import (
	"bufio"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// -mode udp echoes every datagram to its sender, on both backends and with
// the offloads on and off, prints its counters and exits 0 on SIGTERM.
func TestUDPMode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(backendtest.TempDir(t), "echo-server")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "build: %s", out)
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		for _, off := range []string{"true", "false"} {
			cmd := exec.Command(bin, "-mode", "udp", "-addr", "127.0.0.1:0", "-loops", "2", "-backend", string(b), "-gso="+off, "-gro="+off)
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			r := bufio.NewReader(stdout)
			line, err := r.ReadString('\n')
			require.NoError(t, err)
			m := regexp.MustCompile(`udp echo on (127\.0\.0\.1:\d+), backend ` + string(b) + `, 2 loops`).FindStringSubmatch(line)
			if m == nil {
				cmd.Process.Kill()
				t.Fatalf("start line %q", line)
			}
			c, err := net.Dial("udp", m[1])
			require.NoError(t, err)
			require.NoError(t, c.SetDeadline(time.Now().Add(10*time.Second)))
			buf := make([]byte, 2048)
			for _, msg := range []string{"veloq", "", string(make([]byte, 1200))} {
				_, err := c.Write([]byte(msg))
				require.NoError(t, err)
				n, err := c.Read(buf)
				require.NoError(t, err)
				require.Equal(t, msg, string(buf[:n]))
			}
			c.Close()
			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			// Wait closes stdout once the process exits: it is called only
			// after the output is read to its end, or counters printed at
			// exit could be lost (1 run in 5 here).
			type exit struct {
				rest string
				err  error
			}
			done := make(chan exit, 1)
			go func() {
				b, _ := io.ReadAll(r)
				done <- exit{string(b), cmd.Wait()}
			}()
			var e exit
			select {
			case e = <-done:
				require.NoError(t, e.err)
			case <-time.After(10 * time.Second):
				cmd.Process.Kill()
				t.Fatal("no exit after SIGTERM")
			}
			require.Regexp(t, `3 received, 3 sent, 0 dropped \(output queue full\), 0 dropped by the kernel`, e.rest)
		}
	})
}
