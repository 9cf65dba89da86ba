//go:build unix

package net_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// The tests here drive SpliceTo through a small proxy: every accepted
// connection dials a backend (a stdlib server, so the far end is plain
// kernel sockets) and, once connected, both directions are spliced.

type spliceProxy struct {
	backend string
	// mode: "connect" splices both ways when the backend connects; "hold"
	// also holds the client's input with HoldData until then (so SpliceTo
	// has buffered input to forward first); "switch" copies each direction
	// in OnData and switches to splicing after the first 1000 bytes.
	mode string
	// propagate closes the other side when one side closes with an error;
	// off, the reactor's own rules (ErrSpliceBroken) are what closes it.
	propagate bool
	closed    chan error // client OnClose errors
	t         *testing.T
}

type splicePair struct {
	client, backend *vnet.Conn
	copied          [2]int // bytes copied per direction before switching
}

func (p *spliceProxy) OnOpen(c *vnet.Conn) {
	pr := &splicePair{client: c}
	c.SetValue(pr)
	if p.mode == "hold" {
		c.HoldData()
	} else {
		c.PauseRead()
	}
	bh := &vnet.HandlerFuncs{
		Open: func(b *vnet.Conn) {
			if p.mode == "switch" {
				c.ResumeRead()
				c.ReleaseData()
				return
			}
			if err := c.SpliceTo(b); err != nil {
				p.t.Errorf("SpliceTo client→backend: %v", err)
			}
			if err := b.SpliceTo(c); err != nil {
				p.t.Errorf("SpliceTo backend→client: %v", err)
			}
		},
		Data:  func(b *vnet.Conn) { p.forward(pr, b, c, 1) },
		EOF:   func(b *vnet.Conn) { c.CloseWrite() },
		Close: func(b *vnet.Conn, err error) { p.sideClosed(c, err) },
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := c.Loop().Dial(ctx, "tcp", p.backend, bh)
	if err != nil {
		c.Abort(err)
		return
	}
	pr.backend = b
}

func (p *spliceProxy) forward(pr *splicePair, src, dst *vnet.Conn, dir int) {
	in, _ := src.Next(-1)
	dst.Write(in)
	pr.copied[dir] += len(in)
	if p.mode == "switch" && pr.copied[dir] >= 1000 {
		if err := src.SpliceTo(dst); err != nil && !errors.Is(err, vnet.ErrClosed) {
			p.t.Errorf("SpliceTo mid-stream: %v", err)
		}
	}
}

func (p *spliceProxy) OnData(c *vnet.Conn) {
	pr := c.Value().(*splicePair)
	p.forward(pr, c, pr.backend, 0)
}

func (p *spliceProxy) OnEOF(c *vnet.Conn) {
	c.Value().(*splicePair).backend.CloseWrite()
}

func (p *spliceProxy) OnClose(c *vnet.Conn, err error) {
	if pr, ok := c.Value().(*splicePair); ok && pr.backend != nil {
		p.sideClosed(pr.backend, err)
	}
	if p.closed != nil {
		p.closed <- err
	}
}

func (p *spliceProxy) sideClosed(other *vnet.Conn, err error) {
	if err != nil && p.propagate && !other.Closed() {
		other.Abort(err)
	}
}

// stdEcho is a stdlib echo server: it copies until EOF, then half-closes.
func stdEcho(t *testing.T) (addr string, conns *sync.WaitGroup) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns = &sync.WaitGroup{}
	t.Cleanup(func() { ln.Close(); conns.Wait() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			go func() {
				defer conns.Done()
				defer c.Close()
				c.SetDeadline(time.Now().Add(30 * time.Second))
				plainCopy(c, c)
				c.(*net.TCPConn).CloseWrite()
			}()
		}
	}()
	return ln.Addr().String(), conns
}

// plainCopy is io.Copy without the stdlib's TCP-to-TCP splice, whose
// pooled pipes would show up in the descriptor counts.
func plainCopy(dst io.Writer, src io.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func quietLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func startSpliceProxy(t *testing.T, b vnet.Backend, p *spliceProxy, loops int) *vnet.Server {
	t.Helper()
	p.t = t
	s, err := vnet.Listen("tcp", "127.0.0.1:0", p, vnet.WithBackend(b), vnet.WithLoops(loops), vnet.WithLogger(quietLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shutdown(t, s) })
	return s
}

func shutdown(t *testing.T, s *vnet.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
}

func dialTCP(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// roundTrip sends data (from a goroutine, so neither side's buffers need
// to hold it all), half-closes, and checks that exactly data comes back,
// then EOF.
func roundTrip(t *testing.T, c *net.TCPConn, data []byte) {
	t.Helper()
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.CloseWrite()
		}
		werr <- err
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Errorf("read: %v (after %d of %d bytes)", err, len(got), len(data))
		return
	}
	if err := <-werr; err != nil {
		t.Errorf("write: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Errorf("got %d bytes back, want %d, first difference at %d", len(got), len(data), firstDiff(got, data))
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func totalSpliced(s *vnet.Server) uint64 {
	var n uint64
	for _, st := range s.Stats() {
		n += st.Spliced
	}
	return n
}

// Bytes arrive exactly, in order, over concurrent spliced streams, in
// every mode of switching to the splice, and half-close passes through.
func TestSpliceForwardsExactly(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		skipNoSplice(t, b)
		for _, mode := range []string{"connect", "hold", "switch"} {
			t.Run(mode, func(t *testing.T) {
				addr, _ := stdEcho(t)
				s := startSpliceProxy(t, b, &spliceProxy{backend: addr, mode: mode, propagate: true}, 2)
				var wg sync.WaitGroup
				for i := range 8 {
					c := dialTCP(t, s.Addr().String())
					data := randomBytes(uint64(i), 1<<20+i*777)
					wg.Go(func() { roundTrip(t, c, data) })
				}
				wg.Wait()
				if n := totalSpliced(s); n == 0 {
					t.Errorf("no byte was spliced (Stats.Spliced 0)")
				}
			})
		}
	})
}

// The backend half-closes first: its bytes and FIN reach the client, and
// the client can still send afterwards.
func TestSpliceHalfCloseFromBackend(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		skipNoSplice(t, b)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		got := make(chan string, 1)
		go func() {
			c, err := ln.Accept()
			if err != nil {
				got <- err.Error()
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second))
			c.Write([]byte("greeting"))
			c.(*net.TCPConn).CloseWrite()
			rest, err := io.ReadAll(c)
			if err != nil {
				got <- err.Error()
				return
			}
			got <- string(rest)
		}()
		s := startSpliceProxy(t, b, &spliceProxy{backend: ln.Addr().String(), mode: "connect", propagate: true}, 1)
		c := dialTCP(t, s.Addr().String())
		first, err := io.ReadAll(c)
		if err != nil || string(first) != "greeting" {
			t.Fatalf("client read %q, %v; want greeting then EOF", first, err)
		}
		c.Write([]byte("after the backend's FIN"))
		c.CloseWrite()
		if r := <-got; r != "after the backend's FIN" {
			t.Fatalf("backend got %q", r)
		}
		waitConns(t, s, 0)
	})
}

func waitConns(t *testing.T, s *vnet.Server, want int) {
	t.Helper()
	require.Eventually(t, func() bool { return s.NumConns() == want }, 20*time.Second, 5*time.Millisecond,
		"connections open never reached %d", want)
}

func resetConn(t *testing.T, c *net.TCPConn) {
	t.Helper()
	if err := c.SetLinger(0); err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// A client that resets mid-stream frees the backend connection, and after
// the server stops every descriptor it opened (sockets, pipes) is closed.
func TestSpliceResetReleasesEverything(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		skipNoSplice(t, b)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		ended := make(chan error, 4)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					c.SetDeadline(time.Now().Add(20 * time.Second))
					err := plainCopy(c, c) // ends when the proxy closes its side
					c.Close()
					ended <- err
				}()
			}
		}()
		before := backendtest.CountFDs(t)
		s, err := vnet.Listen("tcp", "127.0.0.1:0", &spliceProxy{t: t, backend: ln.Addr().String(), mode: "connect", propagate: true},
			vnet.WithBackend(b), vnet.WithLoops(2), vnet.WithLogger(quietLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			c := dialTCP(t, s.Addr().String())
			msg := randomBytes(7, 200<<10)
			go c.Write(msg)
			if _, err := io.ReadFull(c, make([]byte, 1000)); err != nil {
				t.Fatal(err)
			}
			resetConn(t, c)
			select {
			case <-ended:
			case <-time.After(20 * time.Second):
				t.Fatal("the backend connection stayed open after the client reset")
			}
		}
		waitConns(t, s, 0)
		shutdown(t, s)
		// More after is a leak. Fewer is not: an idle pipe another test's
		// loop still pooled may be trimmed meanwhile (it failed that way).
		if after := backendtest.CountFDs(t); after > before {
			t.Errorf("%d descriptors open after shutdown, %d before: %s", after, before, listFDs())
		}
	})
}

// When the destination closes, a splice into it cannot go on: the source
// is aborted with ErrSpliceBroken even when no handler propagates it.
func TestSpliceDestinationClosedAbortsSource(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		skipNoSplice(t, b)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			io.ReadFull(c, make([]byte, 1000))
			c.(*net.TCPConn).SetLinger(0)
			c.Close() // a reset while the client keeps sending
		}()
		p := &spliceProxy{backend: ln.Addr().String(), mode: "connect", closed: make(chan error, 1)}
		s := startSpliceProxy(t, b, p, 1)
		c := dialTCP(t, s.Addr().String())
		go func() {
			chunk := randomBytes(1, 64<<10)
			for {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		}()
		select {
		case err := <-p.closed:
			if !errors.Is(err, vnet.ErrSpliceBroken) {
				t.Fatalf("client closed with %v, want ErrSpliceBroken", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("client connection not closed after the backend reset")
		}
	})
}

// SpliceTo refuses what it cannot do, with ErrCannotSplice, and changes
// nothing then.
func TestSpliceToRefuses(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		skipNoSplice(t, b)
		addr, _ := stdEcho(t)
		results := make(chan string, 8)
		var conns []*vnet.Conn
		h := &vnet.HandlerFuncs{
			Open: func(c *vnet.Conn) {
				conns = append(conns, c) // loop-owned; the conns share one loop
				if len(conns) < 3 {
					return
				}
				a, x, z := conns[0], conns[1], conns[2]
				check := func(name string, err error) {
					if errors.Is(err, vnet.ErrCannotSplice) {
						results <- name + ": refused"
					} else {
						results <- name + ": " + errString(err)
					}
				}
				check("self", a.SpliceTo(a))
				if err := a.SpliceTo(x); err != nil {
					results <- "first: " + err.Error()
				}
				check("source again", a.SpliceTo(x))
				check("destination again", z.SpliceTo(x))
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				defer cancel()
				y, err := c.Loop().Dial(ctx, "tcp", addr, &vnet.HandlerFuncs{})
				if err != nil {
					results <- err.Error()
					return
				}
				check("connecting", x.SpliceTo(y))
				y.Abort(nil)
				results <- "done"
			},
		}
		s, err := vnet.Listen("tcp", "127.0.0.1:0", h, vnet.WithBackend(b), vnet.WithLoops(1), vnet.WithLogger(quietLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { shutdown(t, s) }) // after the clients close (cleanups run last-in first-out)
		for range 3 {
			dialTCP(t, s.Addr().String())
		}
		var got []string
		for r := range results {
			if r == "done" {
				break
			}
			got = append(got, r)
		}
		want := "self: refused|source again: refused|destination again: refused|connecting: refused"
		if strings.Join(got, "|") != want {
			t.Fatalf("got %q\nwant %q", strings.Join(got, "|"), want)
		}
	})
}

func errString(err error) string {
	if err == nil {
		return "accepted"
	}
	return err.Error()
}

// An OnDrain callback that writes to another connection, run while the
// loop flushes, gets that write flushed too.
func TestDrainCallbackWriteIsFlushed(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		var target *vnet.Conn // loop-owned
		h := &vnet.HandlerFuncs{
			Data: func(c *vnet.Conn) {
				in, _ := c.Next(-1)
				if string(in) == "target" {
					target = c
					c.Write([]byte("k"))
					return
				}
				other := target
				c.Write(in)
				c.OnDrain(0, func() { other.Write([]byte("drained")) })
			},
		}
		s, err := vnet.Listen("tcp", "127.0.0.1:0", h, vnet.WithBackend(b), vnet.WithLoops(1), vnet.WithLogger(quietLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { shutdown(t, s) }) // after the clients close (cleanups run last-in first-out)
		a := dialTCP(t, s.Addr().String())
		a.Write([]byte("target"))
		if _, err := io.ReadFull(a, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		x := dialTCP(t, s.Addr().String())
		x.Write([]byte("ping"))
		if _, err := io.ReadFull(x, make([]byte, 4)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 7)
		if _, err := io.ReadFull(a, got); err != nil || string(got) != "drained" {
			t.Fatalf("first connection got %q, %v", got, err)
		}
	})
}

func listFDs() string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range ents {
		target, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, e.Name()+"->"+target)
	}
	return strings.Join(out, " ")
}

// starveFDs makes every new descriptor in the process fail with EMFILE
// until release runs (at the latest when the test ends). It lowers the soft
// RLIMIT_NOFILE to a little above the descriptors open now, so that filling
// is quick whatever the hard limit is, then fills the table up to it with
// /dev/null. Filling, rather than a limit at the open count, leaves no hole
// below the limit for a new descriptor to take. The limit and the table
// are the whole process's: no test of this package runs in parallel (none
// calls t.Parallel), so no other test is starved by it.
// lower sets *cur to at most n: rlimit fields are uint64 on Linux and
// int64 on FreeBSD.
func lower[T int64 | uint64](cur *T, n uint64) { *cur = T(min(uint64(*cur), n)) }

func starveFDs(t *testing.T) (release func()) {
	t.Helper()
	var old syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old))
	low := old
	lower(&low.Cur, uint64(backendtest.CountFDs(t)+16))
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low))
	var fillers []int
	release = func() {
		for _, fd := range fillers {
			unix.Close(fd)
		}
		fillers = nil
		syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old)
	}
	t.Cleanup(release)
	for {
		fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			require.ErrorIs(t, err, unix.EMFILE, "filling the descriptor table")
			return release
		}
		fillers = append(fillers, fd)
	}
}

// halfFillFDs lowers the soft RLIMIT_NOFILE until release so that the
// next two descriptors opened fall in its upper half, with room left for
// them: the two are probed (the kernel gives out the lowest free numbers,
// so a pipe made next gets the same) and the limit set to twice the
// higher. See starveFDs on why changing the limit is safe here.
func halfFillFDs(t *testing.T) (release func()) {
	t.Helper()
	var probe [2]int
	for i := range probe {
		fd, err := unix.Open(os.DevNull, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		require.NoError(t, err)
		probe[i] = fd
	}
	unix.Close(probe[0])
	unix.Close(probe[1])
	var old syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old))
	half := old
	lower(&half.Cur, 2*uint64(max(probe[0], probe[1])))
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &half))
	release = func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) }
	t.Cleanup(release)
	return release
}

// When no pipe can be had (pipe2 fails with EMFILE), SpliceTo returns
// ErrCannotSplice and nothing has changed: input held by PauseRead or
// HoldData is still held, none of it has been passed on, and the fallback
// a proxy takes (ResumeRead or ReleaseData, then copying) serves the
// connection. The client's input is read into the held buffer before the
// attempt where the hold lets it (HoldData), so buffered input is covered.
func TestSpliceToWithoutPipeChangesNothing(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		skipNoSplice(t, b)
		for _, h := range []inputHold{paused, held} {
			t.Run(h.name, func(t *testing.T) {
				s, client, pair := startHeldPair(t, b, h)
				spliced, err := spliceWhile(t, s, pair, starveFDs)
				require.ErrorIs(t, err, vnet.ErrCannotSplice)
				require.ErrorIs(t, err, unix.EMFILE)
				require.Zero(t, spliced, "SpliceTo passed buffered input on, though it failed")
				finishByCopy(t, s, client)
			})
		}
	})
}

// A splice takes no new pipe once half the descriptor table is in use:
// SpliceTo declines, so that sockets (accepts, dials) keep the other half,
// and the pair goes on by copy.
func TestSpliceKeepsHalfTheDescriptorsForSockets(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		skipNoSplice(t, b)
		s, client, pair := startHeldPair(t, b, paused)
		_, err := spliceWhile(t, s, pair, halfFillFDs)
		require.ErrorIs(t, err, vnet.ErrCannotSplice)
		require.ErrorContains(t, err, "kept for sockets")
		finishByCopy(t, s, client)
	})
}

// inputHold is how a client's input is held until its backend connects.
type inputHold struct {
	name    string
	hold    func(*vnet.Conn)
	buffers bool // input is read into the connection's buffer meanwhile
}

var (
	paused = inputHold{"paused", (*vnet.Conn).PauseRead, false}
	held   = inputHold{"held", (*vnet.Conn).HoldData, true}
)

// startHeldPair starts a copyPairHandler server on one loop in front of a
// stdlib echo server, connects a client that sends "before|", and returns
// the pair once the backend connected (and the echo server accepted it:
// an accept left for later would fail while the test starves the table)
// and the client's input is held by h (read into the connection's buffer
// where the hold lets it).
func startHeldPair(t *testing.T, b vnet.Backend, h inputHold) (*vnet.Server, *net.TCPConn, [2]*vnet.Conn) {
	t.Helper()
	addr, accepted := echoOne(t)
	pairs := make(chan [2]*vnet.Conn, 1)
	s, err := vnet.Listen("tcp", "127.0.0.1:0", copyPairHandler(t, addr, h.hold, pairs),
		vnet.WithBackend(b), vnet.WithLoops(1), vnet.WithLogger(quietLogger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { shutdown(t, s) })
	client := dialTCP(t, s.Addr().String())
	client.SetDeadline(time.Now().Add(10 * time.Second)) // a hang shows as a timeout
	_, err = client.Write([]byte("before|"))
	require.NoError(t, err)
	pair := receive(t, pairs, "the backend never connected")
	receive(t, accepted, "the echo server never accepted the backend connection")
	if h.buffers {
		require.Eventually(t, func() bool { return s.Stats()[0].BytesIn >= 7 }, 20*time.Second, time.Millisecond,
			"the client's input never reached the held buffer")
	}
	return s, client, pair
}

// echoOne is a stdlib echo server for one connection; accepted is closed
// once it has accepted it.
func echoOne(t *testing.T) (addr string, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	acc := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { ln.Close(); <-done })
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		close(acc)
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		plainCopy(c, c)
		c.(*net.TCPConn).CloseWrite()
	}()
	return ln.Addr().String(), acc
}

// spliceWhile asks the client of pair to splice into its backend while
// starve is in effect, then takes a proxy's fallback (lift the holds, copy
// in OnData), and returns the client's SplicedBytes and SpliceTo's error.
func spliceWhile(t *testing.T, s *vnet.Server, pair [2]*vnet.Conn, starve func(*testing.T) func()) (int64, error) {
	t.Helper()
	type result struct {
		err     error
		spliced int64
	}
	done := make(chan result, 1)
	release := starve(t)
	err := s.Loops()[0].Post(func() {
		c, back := pair[0], pair[1]
		err := c.SpliceTo(back)
		done <- result{err, c.SplicedBytes()}
		c.ResumeRead()
		c.ReleaseData()
	})
	r := receive(t, done, "the posted SpliceTo never ran")
	release()
	require.NoError(t, err)
	return r.spliced, r.err
}

// finishByCopy checks that the client's input before and after a failed
// SpliceTo comes back through the copying pair, followed by EOF.
func finishByCopy(t *testing.T, s *vnet.Server, client *net.TCPConn) {
	t.Helper()
	_, err := client.Write([]byte("after"))
	require.NoError(t, err)
	require.NoError(t, client.CloseWrite())
	got, err := io.ReadAll(client)
	require.NoError(t, err, "the connection was neither served nor closed (got %q)", got)
	require.Equal(t, "before|after", string(got))
	require.Zero(t, totalSpliced(s))
}

// copyPairHandler serves each client with a connection to addr and copies
// both ways. The client's input is held with hold until the test lifts
// it; every connected pair (client, backend) is sent on pairs.
func copyPairHandler(t *testing.T, addr string, hold func(*vnet.Conn), pairs chan<- [2]*vnet.Conn) vnet.Handler {
	copyTo := func(src, dst *vnet.Conn) {
		in, _ := src.Next(-1)
		dst.Write(in)
	}
	return &vnet.HandlerFuncs{
		Open: func(c *vnet.Conn) {
			hold(c)
			bh := &vnet.HandlerFuncs{
				Open:  func(b *vnet.Conn) { pairs <- [2]*vnet.Conn{c, b} },
				Data:  func(b *vnet.Conn) { copyTo(b, c) },
				EOF:   func(*vnet.Conn) { c.CloseWrite() },
				Close: func(*vnet.Conn, error) { c.Close() },
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			b, err := c.Loop().Dial(ctx, "tcp", addr, bh)
			if err != nil {
				t.Errorf("dial: %v", err)
				c.Abort(err)
				return
			}
			c.SetValue(b)
		},
		Data: func(c *vnet.Conn) { copyTo(c, c.Value().(*vnet.Conn)) },
		EOF:  func(c *vnet.Conn) { c.Value().(*vnet.Conn).CloseWrite() },
	}
}

// receive returns the next value from ch, failing the test with what if
// none comes within 20 seconds.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		t.Fatal(what)
	}
	panic("unreachable")
}

// setFDLimit sets the soft RLIMIT_NOFILE to n for the rest of the test
// (see starveFDs on why that is safe here).
func setFDLimit(t *testing.T, n uint64) {
	t.Helper()
	var old syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old))
	if uint64(old.Max) < n {
		t.Skipf("needs a descriptor limit of %d; the hard limit is %d", n, old.Max)
	}
	require.Less(t, backendtest.CountFDs(t), int(n)/4, "too many descriptors open for the test's limit")
	lim := old
	lim.Cur = old.Max
	lower(&lim.Cur, n) // to n: the hard limit is above it
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// Idle splice pipes give their descriptors back: a loop pools at most
// 1/32 of the soft RLIMIT_NOFILE in them, and closes those that stay
// unused for a second, so once the splices end the process's descriptor
// count returns to what it was before them.
func TestSplicePipePoolBoundedAndTrimmed(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		skipNoSplice(t, b)
		const limit, pairs = 512, 16 // 32 pipes in use, at most 8 kept
		setFDLimit(t, limit)
		addr, backConns := stdEcho(t)
		s := startSpliceProxy(t, b, &spliceProxy{backend: addr, mode: "connect", propagate: true}, 1)
		before := backendtest.CountFDs(t)

		// Every pair is spliced both ways (a pipe each) at once: each
		// client gets a byte back before any of them ends.
		var clients []*net.TCPConn
		for range pairs {
			c := dialTCP(t, s.Addr().String())
			_, err := c.Write([]byte{'x'})
			require.NoError(t, err)
			_, err = io.ReadFull(c, make([]byte, 1))
			require.NoError(t, err)
			clients = append(clients, c)
		}
		for _, c := range clients {
			require.NoError(t, c.CloseWrite())
			_, err := io.ReadAll(c)
			require.NoError(t, err)
			c.Close()
		}
		waitConns(t, s, 0)
		backConns.Wait()

		kept := backendtest.CountFDs(t) - before
		require.LessOrEqual(t, kept, limit/32, "descriptors kept in idle pipes after %d splices ended: %s", 2*pairs, listFDs())
		require.Eventually(t, func() bool { return backendtest.CountFDs(t) == before }, 20*time.Second, 10*time.Millisecond,
			"idle pipes never closed: the descriptor count never returned to %d, its value before the splices", before)
		t.Logf("descriptors in idle pipes: %d when the splices ended, 0 once trimmed", kept)
	})
}

// skipNoSplice skips a splice test on the portable backend, which has no
// splice: TestSpliceToRefusesPortable checks that it says so.
func skipNoSplice(t *testing.T, b vnet.Backend) {
	t.Helper()
	if b == vnet.BackendPortable {
		t.Skip("the portable backend has no splice: SpliceTo refuses it (TestSpliceToRefusesPortable)")
	}
}

// On the portable backend SpliceTo refuses with ErrCannotSplice and says
// why, and the pair goes on by copy.
func TestSpliceToRefusesPortable(t *testing.T) {
	errs := make(chan error, 2)
	var first *vnet.Conn // loop-owned
	h := &vnet.HandlerFuncs{
		Open: func(c *vnet.Conn) {
			if first == nil {
				first = c
				return
			}
			errs <- c.SpliceTo(first)
			c.Write([]byte("still here"))
		},
	}
	s, err := vnet.Listen("tcp", "127.0.0.1:0", h, vnet.WithBackend(vnet.BackendPortable), vnet.WithLoops(1), vnet.WithLogger(quietLogger(t)))
	require.NoError(t, err)
	t.Cleanup(func() { shutdown(t, s) })
	dialTCP(t, s.Addr().String())
	second := dialTCP(t, s.Addr().String())
	err = <-errs
	require.ErrorIs(t, err, vnet.ErrCannotSplice)
	require.ErrorContains(t, err, "portable backend has no splice")
	got := make([]byte, len("still here"))
	_, err = io.ReadFull(second, got)
	require.NoError(t, err)
	require.Equal(t, "still here", string(got))
}
