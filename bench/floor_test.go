package bench_test

// The C floors that proxy.sh and udp.sh run (bench/floor/*_relay.c and
// *udp_echo.c), built with gcc and checked on loopback: bytes through a
// relay come back whole and in order, a relay closes each pair when either
// side goes and keeps no descriptor after, and a UDP echo answers every
// datagram. benchrun's own floor servers are tested in cmd/benchrun.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// buildC compiles bench/floor/src into a temporary directory. A source that
// includes liburing is skipped where liburing-dev is missing; any other
// failure to build fails the test.
func buildC(t *testing.T, src string) string {
	t.Helper()
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("gcc not installed")
	}
	text, err := os.ReadFile(filepath.Join("floor", src))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), strings.TrimSuffix(src, ".c"))
	args := []string{"-O2", "-Wall", "-o", bin, filepath.Join("floor", src)}
	if bytes.Contains(text, []byte("<liburing.h>")) {
		if _, err := os.Stat("/usr/include/liburing.h"); err != nil {
			t.Skipf("%s needs liburing: apt-get install liburing-dev", src)
		}
		args = append(args, "-luring")
	}
	if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("gcc %s: %v\n%s", src, err, out)
	}
	return bin
}

// eventually polls cond until it holds or 5 s pass, as testify's
// require.Eventually does (the bench module does not depend on testify).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("not within 5 s: %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling a condition, not ordering events
	}
}

// start runs bin with args until the test ends; stdout is returned as a
// reader for servers that print their address.
func start(t *testing.T, bin string, args ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, bufio.NewReader(out)
}

// sockets counts the sockets process pid holds.
func sockets(t *testing.T, pid int) int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			n++
		}
	}
	return n
}

// echoUpstream is a TCP echo server that counts its open connections and
// keeps them, so a test can close one from the upstream side.
type echoUpstream struct {
	ln    net.Listener
	sink  bool // read only, echo nothing
	open  atomic.Int64
	read  atomic.Int64 // bytes received on every connection
	mu    sync.Mutex
	conns []net.Conn
}

func newEchoUpstream(t *testing.T, sink bool) *echoUpstream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &echoUpstream{ln: ln, sink: sink}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u.open.Add(1)
			u.mu.Lock()
			u.conns = append(u.conns, c)
			u.mu.Unlock()
			go func() {
				defer u.open.Add(-1)
				defer c.Close()
				if u.sink {
					io.Copy(io.Discard, countReads{c, &u.read})
				} else {
					io.Copy(c, countReads{c, &u.read})
				}
			}()
		}
	}()
	return u
}

// countReads counts what is read from r into n.
type countReads struct {
	r io.Reader
	n *atomic.Int64
}

func (c countReads) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// floorCase is one floor program run with some arguments.
type floorCase struct {
	name, src string
	args      []string
}

func TestFloorRelays(t *testing.T) {
	for _, c := range []floorCase{
		{"epoll_relay", "epoll_relay.c", nil},
		{"uring_relay", "uring_relay.c", nil},
		{"uring_relay-single", "uring_relay.c", []string{"-recv", "single"}},
		{"uring_relay-batch", "uring_relay.c", []string{"-batch-wait", "20"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := buildC(t, c.src)
			up := newEchoUpstream(t, false)
			addr, pid := startRelay(t, bin, up, c.args)
			checkRelay(t, addr, up)
			// Its listener is all it keeps (the probe's pair is gone too).
			eventually(t, "the relay closes every pair", func() bool {
				return up.open.Load() == 0 && sockets(t, pid) == 1
			})
			sink := newEchoUpstream(t, true)
			addr, _ = startRelay(t, bin, sink, c.args)
			checkRelayDrain(t, addr, sink)
		})
	}
}

// startRelay runs a relay to up and returns its address and pid once it accepts.
func startRelay(t *testing.T, bin string, up *echoUpstream, args []string) (string, int) {
	t.Helper()
	addr := freePort(t)
	cmd, _ := start(t, bin, append([]string{"-addr", addr, "-upstream", up.ln.Addr().String()}, args...)...)
	eventually(t, "the relay accepts", func() bool {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
	return addr, cmd.Process.Pid
}

// checkRelay sends messages of several sizes through the relay on 8
// connections at once, each echoed whole, then closes one pair from the
// upstream's side and the rest from the clients'.
func checkRelay(t *testing.T, addr string, up *echoUpstream) {
	const conns = 8
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	clients := make([]net.Conn, conns)
	for i := range clients {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		clients[i] = c
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			for j, size := range []int{1, 64, 4097, 70000, 300000} {
				msg := bytes.Repeat([]byte{byte('a' + i), byte('0' + j)}, size/2+1)[:size]
				// write and read at once: a large message does not fit the socket buffers
				werr := make(chan error, 1)
				go func() { _, err := c.Write(msg); werr <- err }()
				got := make([]byte, size)
				if _, err := io.ReadFull(c, got); err != nil {
					errs <- fmt.Errorf("conn %d, %d B: %w", i, size, err)
					return
				}
				if err := <-werr; err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(got, msg) {
					errs <- fmt.Errorf("conn %d, %d B: the echo differs", i, size)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// (the probe's upstream connection may be accepted late, and then closes)
	eventually(t, "every upstream connection is open", func() bool { return up.open.Load() == conns })
	// Half the clients leave: the relay closes their upstream connections.
	for _, c := range clients[:conns/2] {
		c.Close()
	}
	eventually(t, "the upstream sees half the pairs closed", func() bool { return up.open.Load() == conns/2 })
	// The upstream closes the rest: the relay closes their clients.
	up.mu.Lock()
	for _, c := range up.conns {
		c.Close()
	}
	up.mu.Unlock()
	for i, c := range clients[conns/2:] {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, err := c.Read(make([]byte, 1)); err != io.EOF {
			t.Errorf("client %d after its upstream closed: read %d, %v; want EOF", conns/2+i, n, err)
		}
		c.Close()
	}
}

// checkRelayDrain: a client that sends 300 KB and closes its side at once
// still has every byte delivered to the upstream (a sink: an upstream with
// unread bytes of its own would be sent a reset by the relay's close,
// which discards what it had not read yet) before the pair closes.
func checkRelayDrain(t *testing.T, addr string, up *echoUpstream) {
	const size = 300000
	before := up.read.Load()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).CloseWrite()
	eventually(t, "the upstream receives all 300 KB", func() bool { return up.read.Load()-before == size })
}

var onAddr = regexp.MustCompile(`on (127\.0\.0\.1:[0-9]+)`)

func TestFloorUDPEcho(t *testing.T) {
	for _, c := range []floorCase{
		{"udp_echo", "udp_echo.c", nil},
		{"uring_udp_echo-send", "uring_udp_echo.c", []string{"-send", "send"}},
		{"uring_udp_echo-sendmsg", "uring_udp_echo.c", []string{"-send", "sendmsg"}},
		{"uring_udp_echo-sendmmsg", "uring_udp_echo.c", []string{"-send", "sendmmsg"}},
		{"uring_udp_echo-batch", "uring_udp_echo.c", []string{"-batch-wait", "20"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			bin := buildC(t, c.src)
			_, out := start(t, bin, append([]string{"-addr", "127.0.0.1:0"}, c.args...)...)
			line, err := out.ReadString('\n')
			m := onAddr.FindStringSubmatch(line)
			if err != nil || m == nil {
				t.Fatalf("no address line: %q, %v", line, err)
			}
			checkUDPEcho(t, m[1])
		})
	}
}

// checkUDPEcho: 8 sockets, each with one datagram in flight at a time, as
// udp.sh's UDP_WINDOW=1 load; every datagram must come back unchanged.
// Loopback does not drop datagrams at this rate, so a lost one is a bug.
func checkUDPEcho(t *testing.T, addr string) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 8 {
		c, err := net.Dial("udp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 2048)
			for j := range 200 {
				size := []int{1, 64, 1200}[j%3]
				msg := bytes.Repeat([]byte{byte(i), byte(j)}, size)[:size]
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.Write(msg); err != nil {
					errs <- err
					return
				}
				n, err := c.Read(buf)
				if err != nil {
					errs <- fmt.Errorf("socket %d, datagram %d: %w", i, j, err)
					return
				}
				if !bytes.Equal(buf[:n], msg) {
					errs <- fmt.Errorf("socket %d, datagram %d: %d B echo differs", i, j, n)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
