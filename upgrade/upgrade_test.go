//go:build linux

// Linux only: the upgrade runs under a child subreaper (PR_SET_CHILD_SUBREAPER).

package upgrade_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	nethttp "net/http"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/internal/backendtest"
	"github.com/veloq/veloq/internal/selfsigned"
	vnet "github.com/veloq/veloq/net"
	"github.com/veloq/veloq/upgrade"
	"github.com/veloq/veloq/websocket"
)

const helperEnv = "VELOQ_UPGRADE_TEST"

// TestHelperProcess is the server the tests start and upgrade: the test
// binary again, in the mode helperEnv says.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("a child of the upgrade tests")
	}
	switch mode {
	case "crash":
		fmt.Fprintln(os.Stderr, "helper: crashing at start, as a broken binary would")
		os.Exit(3)
	case "ready": // takes the sockets, reports ready, and goes
		u, err := upgrade.New()
		if err != nil || !u.Inherited() {
			os.Exit(5)
		}
		if err := u.Ready(); err != nil {
			os.Exit(6)
		}
		os.Exit(0)
	case "hang":
		if _, err := upgrade.New(); err != nil {
			os.Exit(4)
		}
		time.Sleep(time.Hour) // never reports ready; killed by the parent
	case "serve":
		if err := serve(os.Getenv("VELOQ_STATE")); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
}

// serve is one generation of the upgraded server: HTTP on TCP and a UDP
// echo, on sockets inherited from the previous generation or new ones.
// It appends "pid tcpaddr udpaddr" to state/gens once ready, upgrades on
// SIGUSR2 (then drains and exits) and stops on SIGTERM.
func serve(state string) error {
	u, err := upgrade.New()
	if err != nil {
		return err
	}
	u.ReadyTimeout = 20 * time.Second
	backend := vnet.Backend(os.Getenv("VELOQ_BACKEND"))
	pid := strconv.Itoa(os.Getpid())
	wsu := websocket.NewUpgrader()
	wsEcho := &websocket.HandlerFuncs{Message: func(c *websocket.Conn, typ websocket.MessageType, data []byte) {
		_ = c.WriteMessage(typ, data)
	}}
	hs, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		if string(r.Path) == "/ws" {
			_ = wsu.Upgrade(w, r, wsEcho)
			return
		}
		w.Write([]byte(pid))
	}), vhttp.WithNetOptions(vnet.WithBackend(backend), vnet.WithLoops(2)))
	if err != nil {
		return err
	}
	us, err := vnet.NewServer(&vnet.HandlerFuncs{}, vnet.WithBackend(backend), vnet.WithLoops(2))
	if err != nil {
		return err
	}
	taddr, err := u.Listen(hs, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	// HTTPS (HTTP/1.1 and h2) on a second server: each generation makes
	// its own certificate, the clients do not verify it.
	cert, err := selfsigned.New(time.Hour)
	if err != nil {
		return err
	}
	ts, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		w.Write([]byte(pid))
	}), vhttp.WithTLS(cert.ServerConfig()), vhttp.WithNetOptions(vnet.WithBackend(backend), vnet.WithLoops(2)))
	if err != nil {
		return err
	}
	tlsAddr, err := u.Listen(ts, "tcp", "127.0.0.1:0") // the same address asked for: the second one's sockets
	if err != nil {
		return err
	}
	pl, err := u.ListenPacket(us, "udp", "127.0.0.1:0", vnet.PacketHandlerFunc(func(pc *vnet.PacketConn, p []byte, from netip.AddrPort) {
		_ = pc.WriteTo(p, from)
	}))
	if err != nil {
		return err
	}
	if err := u.Ready(); err != nil {
		return err
	}
	if err := appendLine(filepath.Join(state, "gens"), fmt.Sprintf("%s %s %s %s", pid, taddr, pl.Addr(), tlsAddr)); err != nil {
		return err
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR2, syscall.SIGTERM)
	for s := range sig {
		if s == syscall.SIGUSR2 {
			if err := u.Upgrade(context.Background()); err != nil {
				_ = appendLine(filepath.Join(state, "errors"), err.Error())
				continue
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return errors.Join(hs.Shutdown(ctx), ts.Shutdown(ctx), us.Shutdown(ctx))
	}
	return nil
}

func appendLine(path, line string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteString(line + "\n") // one write: lines do not interleave
	return err
}

type gen struct {
	pid           int
	tcp, udp, tls string
}

func readGens(t *testing.T, state string) []gen {
	b, err := os.ReadFile(filepath.Join(state, "gens"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var gens []gen
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 {
			continue
		}
		pid, _ := strconv.Atoi(f[0])
		gens = append(gens, gen{pid, f[1], f[2], f[3]})
	}
	return gens
}

// counts is what the load generators saw.
type counts struct {
	ok, failed                  atomic.Int64 // requests answered / not answered
	raced                       atomic.Int64 // keep-alive: closed as idle as the request went out (retried)
	udpSent, udpLost            atomic.Int64
	wsOK, wsGoingAway, wsResent atomic.Int64
	byPid                       sync.Map // pid -> *atomic.Int64 of answers
	mu                          sync.Mutex
	errs                        []string
}

func (c *counts) fail(err error) {
	c.failed.Add(1)
	c.mu.Lock()
	if len(c.errs) < 10 {
		c.errs = append(c.errs, err.Error())
	}
	c.mu.Unlock()
}

func (c *counts) served(pid string) {
	n, _ := c.byPid.LoadOrStore(pid, new(atomic.Int64))
	n.(*atomic.Int64).Add(1)
	c.ok.Add(1)
}

const request = "GET / HTTP/1.1\r\nHost: upgrade\r\n\r\n"

// keepAlive sends requests on one connection after another until stop;
// it reconnects when the server closes the connection. A request whose
// connection is closed before any byte of its answer, on a connection
// that has served before, met the server closing it as idle: that
// is HTTP/1.1's own race (RFC 9112 §9.3.1 lets a client retry such a
// request), counted in raced and retried on a new connection; anything
// else failing is a failure.
func keepAlive(addr string, stop <-chan struct{}, c *counts) {
	var conn net.Conn
	var br *bufio.Reader
	used := false
	for {
		select {
		case <-stop:
			if conn != nil {
				conn.Close()
			}
			return
		default:
		}
		if conn == nil {
			var err error
			if conn, err = net.DialTimeout("tcp", addr, 5*time.Second); err != nil {
				c.fail(fmt.Errorf("keep-alive dial: %w", err))
				continue
			}
			br, used = bufio.NewReader(conn), false
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		body, closed, err := roundTrip(conn, br)
		if err != nil {
			conn.Close()
			conn = nil
			if used && nothingRead(err) {
				c.raced.Add(1)
				continue
			}
			c.fail(fmt.Errorf("keep-alive: %w", err))
			continue
		}
		c.served(body)
		used = true
		if closed {
			conn.Close()
			conn = nil
		}
	}
}

// nothingRead reports an error of a connection that ended before a byte
// of the answer came: EOF or a reset.
func nothingRead(err error) bool {
	return errors.Is(err, io.EOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func roundTrip(conn net.Conn, br *bufio.Reader) (body string, closed bool, err error) {
	if _, err := io.WriteString(conn, request); err != nil {
		return "", false, err
	}
	if _, err := br.Peek(1); err != nil {
		return "", false, err
	}
	resp, err := nethttp.ReadResponse(br, nil)
	if err != nil {
		return "", false, fmt.Errorf("after the first byte: %w", err)
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		return "", false, fmt.Errorf("after the first byte: status %d, %v", resp.StatusCode, err)
	}
	return string(b), resp.Close, nil
}

// newConns opens a new connection per request: any error is a failure
// (a refused connect, a reset, a close without an answer).
func newConns(addr string, stop <-chan struct{}, c *counts) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			c.fail(fmt.Errorf("dial: %w", err))
			continue
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		body, _, err := roundTrip(conn, bufio.NewReader(conn))
		conn.Close()
		if err != nil {
			c.fail(fmt.Errorf("new connection: %w", err))
			continue
		}
		c.served(body)
	}
}

var insecure = &tls.Config{InsecureSkipVerify: true} // each generation has its own certificate

// httpsConns is newConns over TLS: a handshake and a request per
// connection.
func httpsConns(addr string, stop <-chan struct{}, c *counts) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		d := &tls.Dialer{NetDialer: &net.Dialer{Timeout: 5 * time.Second}, Config: insecure}
		conn, err := d.Dial("tcp", addr)
		if err != nil {
			c.fail(fmt.Errorf("https dial: %w", err))
			continue
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		body, _, err := roundTrip(conn, bufio.NewReader(conn))
		conn.Close()
		if err != nil {
			c.fail(fmt.Errorf("https: %w", err))
			continue
		}
		c.served(body)
	}
}

// h2Client sends requests over HTTP/2 with net/http's client, which
// retries a request the server's GOAWAY says it did not process (RFC
// 9113 §6.8): that is how HTTP/2 moves clients off a draining server.
func h2Client(addr string, stop <-chan struct{}, c *counts) {
	tr := &nethttp.Transport{TLSClientConfig: insecure.Clone(), ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	client := &nethttp.Client{Transport: tr, Timeout: 5 * time.Second}
	for {
		select {
		case <-stop:
			return
		default:
		}
		resp, err := client.Get("https://" + addr + "/")
		if err != nil {
			c.fail(fmt.Errorf("h2: %w", err))
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || resp.ProtoMajor != 2 {
			c.fail(fmt.Errorf("h2: %s %d %v", resp.Proto, resp.StatusCode, err))
			continue
		}
		c.served(string(b))
	}
}

// wsClient sends numbered text messages one at a time on a WebSocket
// connection and waits for each echo. A close 1001 (going away) from a
// draining server is answered and the client reconnects (to the new
// process) and sends the message again: the server discards what comes
// after its close frame (RFC 6455 §5.5.1), so that message was in flight
// at the switch, counted in wsResent. Any other close or error fails.
func wsClient(addr string, stop <-chan struct{}, c *counts) {
	var conn net.Conn
	var br *bufio.Reader
	for i := 0; ; {
		select {
		case <-stop:
			if conn != nil {
				conn.Close()
			}
			return
		default:
		}
		if conn == nil {
			var err error
			if conn, br, err = wsDial(addr); err != nil {
				c.fail(fmt.Errorf("ws dial: %w", err))
				continue
			}
		}
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		msg := "m" + strconv.Itoa(i)
		op, payload, err := wsExchange(conn, br, msg)
		switch {
		case err != nil:
			c.fail(fmt.Errorf("ws: %w", err))
		case op == 1 && string(payload) == msg:
			c.wsOK.Add(1)
			i++
			continue
		case op == 8 && len(payload) >= 2 && int(payload[0])<<8|int(payload[1]) == 1001:
			c.wsGoingAway.Add(1)
			c.wsResent.Add(1)
			_, _ = conn.Write(wsFrame(8, payload[:2])) // the closing handshake's answer
			_, _ = io.Copy(io.Discard, br)             // until the server closes
		default:
			c.fail(fmt.Errorf("ws: opcode %d payload %q", op, payload))
		}
		conn.Close()
		conn = nil
	}
}

func wsDial(addr string) (net.Conn, *bufio.Reader, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, nil, err
	}
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(conn)
	_, err = io.WriteString(conn, "GET /ws HTTP/1.1\r\nHost: upgrade\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
	if err == nil {
		var resp *nethttp.Response
		if resp, err = nethttp.ReadResponse(br, nil); err == nil && resp.StatusCode != 101 {
			err = fmt.Errorf("handshake answered %d", resp.StatusCode)
		}
	}
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	return conn, br, nil
}

// wsFrame is a masked client frame with a zero key (the payload as is)
// of up to 125 bytes.
func wsFrame(op byte, p []byte) []byte {
	return append([]byte{0x80 | op, 0x80 | byte(len(p)), 0, 0, 0, 0}, p...)
}

// wsExchange sends msg and reads the server's next frame (unmasked, up
// to 125 bytes).
func wsExchange(conn net.Conn, br *bufio.Reader, msg string) (op byte, payload []byte, err error) {
	if _, err := conn.Write(wsFrame(1, []byte(msg))); err != nil {
		return 0, nil, err
	}
	var h [2]byte
	if _, err := io.ReadFull(br, h[:]); err != nil {
		return 0, nil, err
	}
	payload = make([]byte, h[1]&0x7f)
	if _, err := io.ReadFull(br, payload); err != nil {
		return 0, nil, err
	}
	return h[0] & 0x0f, payload, nil
}

// udpClient sends numbered datagrams one at a time and waits up to a
// second for each echo; one not echoed by then is lost.
func udpClient(addr string, stop <-chan struct{}, c *counts) {
	conn, err := net.Dial("udp", addr)
	if err != nil {
		c.fail(err)
		return
	}
	defer conn.Close()
	buf := make([]byte, 64)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		msg := strconv.Itoa(i)
		c.udpSent.Add(1)
		conn.Write([]byte(msg))
		conn.SetReadDeadline(time.Now().Add(time.Second))
		for {
			n, err := conn.Read(buf)
			if err != nil {
				c.udpLost.Add(1)
				break
			}
			if string(buf[:n]) == msg {
				break
			} // a late echo of an earlier one: skip it
		}
	}
}

// TestUpgradeUnderLoad upgrades a server (HTTP and UDP, two loops, one
// SO_REUSEPORT socket per loop each) several times in a row while
// clients keep it busy, each generation a new process of the test
// binary started by the previous one's Upgrade, and counts what the
// clients saw.
func TestUpgradeUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	// Each generation is started by the one before, which exits: make
	// this process their reaper so it can wait for every one.
	require.NoError(t, unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		const upgrades = 10
		state := t.TempDir()
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.Env = append(os.Environ(), helperEnv+"=serve", "VELOQ_STATE="+state, "VELOQ_BACKEND="+string(b))
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		first := make(chan error, 1)
		go func() { first <- cmd.Wait() }()
		var gens []gen
		require.Eventually(t, func() bool { gens = readGens(t, state); return len(gens) == 1 }, 20*time.Second, 5*time.Millisecond)
		g0 := gens[0]
		fds0 := backendtest.CountFDsOf(t, g0.pid) // a fresh start's descriptors

		var c counts
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 3 {
			wg.Add(3)
			go func() { defer wg.Done(); keepAlive(g0.tcp, stop, &c) }()
			go func() { defer wg.Done(); newConns(g0.tcp, stop, &c) }()
			go func() { defer wg.Done(); udpClient(g0.udp, stop, &c) }()
		}
		wg.Add(4)
		go func() { defer wg.Done(); wsClient(g0.tcp, stop, &c) }()
		go func() { defer wg.Done(); wsClient(g0.tcp, stop, &c) }()
		go func() { defer wg.Done(); httpsConns(g0.tls, stop, &c) }()
		go func() { defer wg.Done(); h2Client(g0.tls, stop, &c) }()
		defer func() {
			select {
			case <-stop:
			default:
				close(stop)
			}
			wg.Wait()
		}()
		servedBy := func(pid int) int64 {
			n, ok := c.byPid.Load(strconv.Itoa(pid))
			if !ok {
				return 0
			}
			return n.(*atomic.Int64).Load()
		}
		require.Eventually(t, func() bool { return servedBy(g0.pid) > 50 }, 20*time.Second, time.Millisecond)
		// Each generation's resident memory under the load, taken just
		// before it hands over (and, for the last, before the load stops).
		var rss []int
		for i := 1; i <= upgrades; i++ {
			old := gens[len(gens)-1]
			rss = append(rss, residentKiB(t, old.pid))
			require.NoError(t, unix.Kill(old.pid, unix.SIGUSR2))
			require.Eventually(t, func() bool { gens = readGens(t, state); return len(gens) == i+1 }, 30*time.Second, 5*time.Millisecond)
			cur := gens[i]
			require.Equal(t, g0.tcp, cur.tcp, "the same sockets")
			require.Equal(t, g0.udp, cur.udp)
			require.Equal(t, g0.tls, cur.tls)
			// The old one drains and exits by itself, with status 0.
			if i == 1 {
				require.NoError(t, <-first)
			} else {
				waitPid(t, old.pid)
			}
			require.Eventually(t, func() bool { return servedBy(cur.pid) > 50 }, 20*time.Second, time.Millisecond)
		}
		last := gens[len(gens)-1]
		rss = append(rss, residentKiB(t, last.pid))
		close(stop)
		wg.Wait()
		// A new process holds what a fresh start holds under the same
		// load: nothing of its predecessors carried over (the first
		// generation is the fresh start; half again as much, plus
		// 8 MiB, is room for the heap's and the buffers' own swings).
		t.Logf("%s: resident KiB per generation under load: %v", b, rss)
		// The first generation is sampled after its first 50 answers, the
		// others after a whole period under load (under -race the heap is
		// still growing then: 35 MiB, then 62), so the reference is the
		// larger of the first two, each a fresh start of the program.
		fresh := max(rss[0], rss[1])
		require.LessOrEqual(t, rss[len(rss)-1], fresh*3/2+8<<10, "last generation's memory against a fresh start's")
		// Once the clients are gone, the last generation holds what the
		// first held at its start: no inherited descriptor or ready pipe
		// left open, no socket duplicated twice.
		require.Eventually(t, func() bool { return backendtest.CountFDsOf(t, last.pid) == fds0 }, 10*time.Second, 5*time.Millisecond,
			"descriptors: first generation %d at start, last %d", fds0, backendtest.CountFDsOf(t, last.pid))
		require.NoError(t, unix.Kill(last.pid, unix.SIGTERM))
		waitPid(t, last.pid)

		_, err := os.Stat(filepath.Join(state, "errors"))
		require.ErrorIs(t, err, os.ErrNotExist, "no upgrade failed")
		t.Logf("%s: %d upgrades: %d requests answered, %d failed, %d keep-alive requests met an idle close (retried); %d datagrams, %d lost",
			b, upgrades, c.ok.Load(), c.failed.Load(), c.raced.Load(), c.udpSent.Load(), c.udpLost.Load())
		t.Logf("%s: websocket: %d messages echoed, %d closes 1001 (each a reconnect, its message sent again)",
			b, c.wsOK.Load(), c.wsGoingAway.Load())
		for _, g := range gens {
			t.Logf("generation %d answered %d requests", g.pid, servedBy(g.pid))
		}
		require.Zero(t, c.failed.Load(), "failed requests: %v", c.errs)
		require.Zero(t, c.udpLost.Load(), "lost datagrams")
	})
}

// residentKiB is process pid's resident memory (VmRSS), in KiB.
func residentKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			require.NoError(t, err)
			return n
		}
	}
	t.Fatalf("no VmRSS for %d", pid)
	return 0
}

// waitPid waits for a process this one reaps (as subreaper) to exit
// with status 0.
func waitPid(t *testing.T, pid int) {
	t.Helper()
	var ws unix.WaitStatus
	done := make(chan error, 1)
	go func() {
		_, err := unix.Wait4(pid, &ws, 0, nil)
		done <- err
	}()
	select {
	case err := <-done:
		require.NoError(t, err)
		require.True(t, ws.Exited() && ws.ExitStatus() == 0, "generation %d: %v", pid, ws)
	case <-time.After(30 * time.Second):
		t.Fatalf("generation %d did not exit", pid)
	}
}

// faultServer is a server in this process with an Upgrader whose new
// process is the test binary in mode: the old process must keep serving
// whatever the new one does.
func faultServer(t *testing.T, b vnet.Backend, mode string, timeout time.Duration) (*upgrade.Upgrader, string) {
	u, err := upgrade.New()
	require.NoError(t, err)
	u.ReadyTimeout = timeout
	u.Command = func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
		cmd.Env = append(os.Environ(), helperEnv+"="+mode)
		return cmd
	}
	hs, err := vhttp.NewServer(vhttp.HandlerFunc(func(w *vhttp.ResponseWriter, r *vhttp.Request) {
		w.Write([]byte("old"))
	}), vhttp.WithNetOptions(vnet.WithBackend(b), vnet.WithLoops(2)))
	require.NoError(t, err)
	t.Cleanup(func() { hs.Close() })
	addr, err := u.Listen(hs, "tcp", "127.0.0.1:0")
	require.NoError(t, err)
	require.NoError(t, u.Ready())
	return u, addr.String()
}

// getOld checks that the old server answers a new connection.
func getOld(t *testing.T, addr string) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	body, _, err := roundTrip(conn, bufio.NewReader(conn))
	require.NoError(t, err)
	require.Equal(t, "old", body)
}

func TestUpgradeChildCrashes(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		u, addr := faultServer(t, b, "crash", 20*time.Second)
		err := u.Upgrade(context.Background())
		require.ErrorIs(t, err, upgrade.ErrExited)
		require.Contains(t, err.Error(), "exit status 3")
		getOld(t, addr)
		// Not marked upgraded: a later upgrade may be tried.
		require.ErrorIs(t, u.Upgrade(context.Background()), upgrade.ErrExited)
		getOld(t, addr)
	})
}

func TestUpgradeChildNeverReady(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		u, addr := faultServer(t, b, "hang", time.Minute)
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- u.Upgrade(ctx) }()
		// A second upgrade during the first is refused (with a context
		// already done, one that is not refused starts nothing).
		done, stop := context.WithCancel(context.Background())
		stop()
		require.Eventually(t, func() bool {
			return errors.Is(u.Upgrade(done), upgrade.ErrInProgress)
		}, 5*time.Second, time.Millisecond)
		getOld(t, addr) // served meanwhile
		cancel()
		err := <-errc
		require.ErrorIs(t, err, upgrade.ErrNotReady)
		require.ErrorIs(t, err, context.Canceled)
		getOld(t, addr)
		// And at the ready timeout.
		u.ReadyTimeout = 200 * time.Millisecond
		err = u.Upgrade(context.Background())
		require.ErrorIs(t, err, upgrade.ErrNotReady)
		require.Contains(t, err.Error(), "not ready after 200ms")
		getOld(t, addr)
	})
}

// UpgradeOn upgrades on the signal, its context is done once an upgrade
// succeeded, and a signal during the drain reports ErrUpgraded instead
// of killing the process.
func TestUpgradeOnSignal(t *testing.T) {
	u, addr := faultServer(t, vnet.BackendEpoll, "ready", 20*time.Second)
	reports := make(chan error, 4)
	ctx := u.UpgradeOn(context.Background(), func(err error) { reports <- err }, syscall.SIGUSR2)
	require.NoError(t, unix.Kill(os.Getpid(), unix.SIGUSR2))
	select {
	case <-ctx.Done():
	case err := <-reports:
		t.Fatalf("upgrade failed: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no upgrade")
	}
	getOld(t, addr) // the caller has not shut down yet: still served
	require.NoError(t, unix.Kill(os.Getpid(), unix.SIGUSR2))
	select {
	case err := <-reports:
		require.ErrorIs(t, err, upgrade.ErrUpgraded)
	case <-time.After(20 * time.Second):
		t.Fatal("the second signal was not reported")
	}
}
