//go:build linux

// Linux only: creates sockets with Linux's SOCK_CLOEXEC/SOCK_NONBLOCK flags and counts descriptors in /proc.

package net

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// replyEcho answers each datagram with itself.
var replyEcho = PacketHandlerFunc(func(pc *PacketConn, p []byte, from netip.AddrPort) { _ = pc.Reply(p) })

func newTestServer(t *testing.T, b Backend, loops int) *Server {
	t.Helper()
	s, err := NewServer(echoHandler(), WithBackend(b), WithLoops(loops), WithLogger(testLogger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// echoOnce checks that network/addr echoes a line.
func echoOnce(t *testing.T, network, addr string) {
	t.Helper()
	c, err := net.DialTimeout(network, addr, 5*time.Second)
	require.NoError(t, err)
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = c.Write([]byte("hello\n"))
	require.NoError(t, err)
	line, err := bufio.NewReader(c).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "hello\n", line)
}

func sockFile(t *testing.T, x interface{ File() (*os.File, error) }) *os.File {
	t.Helper()
	f, err := x.File()
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// An inherited TCP socket (one, for two loops) is served: loop 0 accepts
// and hands connections out, so both loops serve.
func TestListenFilesTCP(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		std, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer std.Close()
		s := newTestServer(t, b, 2)
		addr, err := s.ListenFiles(sockFile(t, std.(*net.TCPListener)))
		require.NoError(t, err)
		require.Equal(t, std.Addr().String(), addr.String())
		std.Close() // the server holds its own duplicate
		var conns []net.Conn
		for range 4 {
			echoOnce(t, "tcp", addr.String())
			c, err := net.Dial("tcp", addr.String())
			require.NoError(t, err)
			conns = append(conns, c)
		}
		require.Eventually(t, func() bool {
			return s.Loops()[0].NumConns() > 0 && s.Loops()[1].NumConns() > 0
		}, 5*time.Second, time.Millisecond, "one inherited socket is dispatched to every loop")
		for _, c := range conns {
			c.Close()
		}
	})
}

func TestListenFilesUnix(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		path := filepath.Join(t.TempDir(), "s")
		std, err := net.Listen("unix", path)
		require.NoError(t, err)
		std.(*net.UnixListener).SetUnlinkOnClose(false)
		f := sockFile(t, std.(*net.UnixListener))
		std.Close()
		s := newTestServer(t, b, 2)
		addr, err := s.ListenFiles(f)
		require.NoError(t, err)
		require.Equal(t, "unix", addr.Network())
		echoOnce(t, "unix", path)
		require.NoError(t, s.Close())
		_, err = os.Stat(path)
		require.NoError(t, err, "an inherited socket's file is the caller's: not removed")
	})
}

func TestListenPacketFilesUDP(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		std, err := net.ListenPacket("udp", "127.0.0.1:0")
		require.NoError(t, err)
		f := sockFile(t, std.(*net.UDPConn))
		std.Close()
		s := newTestServer(t, b, 2)
		pl, err := s.ListenPacketFiles(replyEcho, f)
		require.NoError(t, err)
		require.Len(t, pl.Conns(), 1)
		udpEchoOnce(t, pl.Addr().String())
	})
}

func udpEchoOnce(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("udp", addr)
	require.NoError(t, err)
	defer c.Close()
	buf := make([]byte, 16)
	require.Eventually(t, func() bool { // UDP: a datagram may be lost, retry
		c.Write([]byte("ping"))
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		n, err := c.Read(buf)
		return err == nil && string(buf[:n]) == "ping"
	}, 5*time.Second, time.Millisecond)
}

// A server's per-loop SO_REUSEPORT sockets, handed to another server,
// are served one per loop; once the first server closes, connections
// (those queued on its sockets included) go to the second.
func TestListenerFilesHandOver(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		old := newTestServer(t, b, 2)
		addr, err := old.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		pl, err := old.ListenPacket("udp", "127.0.0.1:0", replyEcho)
		require.NoError(t, err)
		files, err := old.ListenerFiles(nil)
		require.NoError(t, err)
		require.Len(t, files, 2, "one SO_REUSEPORT socket per loop")
		require.Equal(t, "tcp:"+addr.String(), files[0].Name())
		pfiles, err := pl.Files()
		require.NoError(t, err)
		require.Len(t, pfiles, 2)
		// Connections queued on the old sockets before anyone else serves
		// them: the old server stops accepting (closes its descriptors)
		// with them in the queues.
		var queued []net.Conn
		for range 8 {
			c, err := net.Dial("tcp", addr.String())
			require.NoError(t, err)
			queued = append(queued, c)
		}
		require.NoError(t, old.CloseListeners())

		s := newTestServer(t, b, 2)
		got, err := s.ListenFiles(files...)
		require.NoError(t, err)
		require.Equal(t, addr.String(), got.String())
		npl, err := s.ListenPacketFiles(replyEcho, pfiles...)
		require.NoError(t, err)
		require.Len(t, npl.Conns(), 2)
		for _, f := range append(files, pfiles...) {
			f.Close()
		}
		for i, l := range s.Loops() {
			n := make(chan int, 1)
			require.NoError(t, l.Post(func() { n <- len(l.listeners) }))
			require.Equal(t, 1, <-n, "loop %d serves one inherited socket", i)
		}
		// Echoes also come from the new server: the connections accepted by
		// the old one before it stopped were none (it never got to them).
		for _, c := range queued {
			c.SetDeadline(time.Now().Add(5 * time.Second))
			_, err := c.Write([]byte("queued\n"))
			require.NoError(t, err)
			line, err := bufio.NewReader(c).ReadString('\n')
			require.NoError(t, err, "a connection queued at the hand-over is served, not reset")
			require.Equal(t, "queued\n", line)
			c.Close()
		}
		require.NoError(t, old.Close())
		echoOnce(t, "tcp", addr.String())
		udpEchoOnce(t, pl.Addr().String())
	})
}

func TestListenFilesBad(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		s := newTestServer(t, b, 1)
		reg, err := os.CreateTemp(t.TempDir(), "regular")
		require.NoError(t, err)
		defer reg.Close()
		_, err = s.ListenFiles(reg)
		require.ErrorIs(t, err, ErrNotSocket)
		require.Contains(t, err.Error(), reg.Name())
		_, err = s.ListenPacketFiles(replyEcho, reg)
		require.ErrorIs(t, err, ErrNotSocket)

		udp, err := net.ListenPacket("udp", "127.0.0.1:0")
		require.NoError(t, err)
		defer udp.Close()
		_, err = s.ListenFiles(sockFile(t, udp.(*net.UDPConn)))
		require.ErrorIs(t, err, ErrSocketType)

		tcp, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer tcp.Close()
		_, err = s.ListenPacketFiles(replyEcho, sockFile(t, tcp.(*net.TCPListener)))
		require.ErrorIs(t, err, ErrSocketType)

		fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		require.NoError(t, err)
		bound := os.NewFile(uintptr(fd), "not-listening")
		defer bound.Close()
		_, err = s.ListenFiles(bound)
		require.ErrorIs(t, err, ErrNotListening)

		// A good file after a bad one: nothing is served, nothing leaks.
		_, err = s.ListenFiles(sockFile(t, tcp.(*net.TCPListener)), reg)
		require.ErrorIs(t, err, ErrNotSocket)
		require.Nil(t, s.Addr())
	})
}

func TestActivationFilesEnv(t *testing.T) {
	t.Setenv("LISTEN_FDS", "1")
	t.Setenv("LISTEN_PID", strconv.Itoa(os.Getppid()))
	_, err := ActivationFiles(false)
	require.ErrorIs(t, err, ErrActivation)
	require.Contains(t, err.Error(), "names another process")

	t.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	t.Setenv("LISTEN_FDNAMES", "a:b")
	_, err = ActivationFiles(false)
	require.ErrorIs(t, err, ErrActivation)

	_, err = ActivationFiles(true)
	require.Error(t, err)
	_, set := os.LookupEnv("LISTEN_FDS")
	require.False(t, set, "unset removes the variables")
	files, err := ActivationFiles(false)
	require.NoError(t, err)
	require.Empty(t, files, "not activated")
}

// TestHelperProcess is the activated child of TestActivation: it serves
// the sockets passed as systemd passes them, echoing, until stdin closes.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("VELOQ_INHERIT_HELPER") != "activate" {
		t.Skip("the child of TestActivation")
	}
	if os.Getenv("VELOQ_SET_LISTEN_PID") != "" {
		// What a service manager's forked child does before exec: the
		// parent cannot know the pid in advance.
		os.Setenv("LISTEN_PID", strconv.Itoa(os.Getpid()))
	}
	if err := serveActivated(); err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

func serveActivated() error {
	files, err := ActivationFiles(true)
	if err != nil {
		return err
	}
	if _, ok := os.LookupEnv("LISTEN_FDS"); ok {
		return errors.New("LISTEN_FDS still set")
	}
	s, err := NewServer(echoHandler(), WithBackend(Backend(os.Getenv("VELOQ_BACKEND"))), WithLoops(2))
	if err != nil {
		return err
	}
	defer s.Close()
	if web := FilesNamed(files, "web"); len(web) > 0 {
		if _, err := s.ListenFiles(web...); err != nil {
			return err
		}
	}
	if dns := FilesNamed(files, "dns"); len(dns) > 0 {
		if _, err := s.ListenPacketFiles(replyEcho, dns...); err != nil {
			return err
		}
	}
	for _, f := range files {
		f.Close()
	}
	fmt.Println("ready")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the test closes stdin
	return nil
}

// TestActivation starts a child with the sockets as systemd passes them
// (descriptors 3 and 4, LISTEN_FDS, LISTEN_FDNAMES, LISTEN_PID) and
// checks that it serves both.
func TestActivation(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		tcp, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer tcp.Close()
		udp, err := net.ListenPacket("udp", "127.0.0.1:0")
		require.NoError(t, err)
		defer udp.Close()
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.Env = append(os.Environ(), "VELOQ_INHERIT_HELPER=activate", "VELOQ_SET_LISTEN_PID=1",
			"VELOQ_BACKEND="+string(b), "LISTEN_FDS=2", "LISTEN_FDNAMES=web:dns")
		cmd.ExtraFiles = []*os.File{sockFile(t, tcp.(*net.TCPListener)), sockFile(t, udp.(*net.UDPConn))}
		runHelper(t, cmd)
		tcp.Close() // only the child holds them now
		udp.Close()
		echoOnce(t, "tcp", tcp.Addr().String())
		udpEchoOnce(t, udp.LocalAddr().String())
	})
}

// runHelper starts cmd, waits for its "ready" line, and stops it at the
// end of the test by closing its stdin.
func runHelper(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
			t.Error("helper did not stop")
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line, "the helper says why it failed")
}

// TestActivationSystemd runs the child under the real
// systemd-socket-activate, which binds the socket, forks, sets LISTEN_*
// and execs.
func TestActivationSystemd(t *testing.T) {
	bin, err := exec.LookPath("systemd-socket-activate")
	if err != nil {
		t.Skip("systemd-socket-activate is not installed:", err)
	}
	forEachBackend(t, func(t *testing.T, b Backend) {
		probe, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		addr := probe.Addr().String()
		probe.Close()
		cmd := exec.Command(bin, "-l", addr, "--fdname=web",
			"-E", "VELOQ_INHERIT_HELPER=activate", "-E", "VELOQ_BACKEND="+string(b),
			os.Args[0], "-test.run=^TestHelperProcess$")
		stderr := &strings.Builder{}
		cmd.Stderr = stderr
		stdin, err := cmd.StdinPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		defer func() {
			stdin.Close()
			cmd.Process.Signal(unix.SIGTERM)
			cmd.Wait()
		}()
		// It execs the program at the first connection; that one waits in
		// the backlog meanwhile.
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.Eventually(t, func() bool {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			if err != nil {
				return false
			}
			c.Close()
			return true
		}, 10*time.Second, 10*time.Millisecond, stderr)
		echoOnce(t, "tcp", addr)
	})
}

// An old process with another loop count: 4 sockets for 2 loops (two
// each, every queue read), 2 sockets for 4 loops (loops 0 and 1 accept
// and hand connections to all four).
func TestListenFilesLoopCounts(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		for _, tc := range []struct{ old, new int }{{4, 2}, {2, 4}} {
			old := newTestServer(t, b, tc.old)
			addr, err := old.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			files, err := old.ListenerFiles(addr)
			require.NoError(t, err)
			require.Len(t, files, tc.old)
			require.NoError(t, old.Close())
			s := newTestServer(t, b, tc.new)
			_, err = s.ListenFiles(files...)
			require.NoError(t, err)
			for _, f := range files {
				f.Close()
			}
			perLoop := make([]int, tc.new)
			for i, l := range s.Loops() {
				n := make(chan int, 1)
				require.NoError(t, l.Post(func() {
					k := 0
					for _, ln := range l.listeners {
						if ln != nil {
							k++
						}
					}
					n <- k
				}))
				perLoop[i] = <-n
			}
			if tc.old > tc.new {
				require.Equal(t, []int{2, 2}, perLoop)
			} else {
				require.Equal(t, []int{1, 1, 0, 0}, perLoop)
			}
			// Connections hashed to every socket are served; with
			// dispatch every loop gets some.
			var conns []net.Conn
			for range 32 {
				c, err := net.Dial("tcp", addr.String())
				require.NoError(t, err)
				conns = append(conns, c)
			}
			for _, c := range conns {
				c.SetDeadline(time.Now().Add(5 * time.Second))
				c.Write([]byte("x\n"))
				line, err := bufio.NewReader(c).ReadString('\n')
				require.NoError(t, err)
				require.Equal(t, "x\n", line)
			}
			if tc.old < tc.new {
				for i, l := range s.Loops() {
					require.Positive(t, l.NumConns(), "loop %d got connections", i)
				}
			}
			for _, c := range conns {
				c.Close()
			}
		}
	})
}
