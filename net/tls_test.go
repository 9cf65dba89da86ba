package net

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/selfsigned"
)

// testCert is the certificate the package's TLS tests serve.
var testCert = selfsigned.Shared

// startTLS serves h over TLS with cfg (the test certificate when nil),
// its handshakes placed by place (forEachTLSPlacement).
func startTLS(t *testing.T, b Backend, place Option, h Handler, cfg *tls.Config, opts ...Option) *Server {
	t.Helper()
	if cfg == nil {
		cfg = testCert().ServerConfig()
	}
	return startServer(t, b, h, append([]Option{WithTLS(cfg), place}, opts...)...)
}

// forEachTLSPlacement runs fn on each backend with handshakes on the loop
// and off it (WithTLSHandshakeOffLoop): every TLS behaviour holds in both.
func forEachTLSPlacement(t *testing.T, fn func(t *testing.T, b Backend, place Option)) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		for _, off := range []bool{false, true} {
			name := "on-loop"
			if off {
				name = "off-loop"
			}
			t.Run(name, func(t *testing.T) { fn(t, b, WithTLSHandshakeOffLoop(off)) })
		}
	})
}

// dialTLS connects a crypto/tls client to s and completes the handshake.
func dialTLS(t *testing.T, s *Server, cfg *tls.Config) *tls.Conn {
	t.Helper()
	if cfg == nil {
		cfg = testCert().ClientConfig("localhost")
	}
	raw, err := net.Dial("tcp", s.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { raw.Close() })
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	c := tls.Client(raw, cfg)
	require.NoError(t, c.Handshake())
	return c
}

// tlsTotals sums the TLS counters of a server's loops.
func tlsTotals(s *Server) (st Stats) {
	for _, l := range s.Stats() {
		st.TLSHandshakes += l.TLSHandshakes
		st.TLSHandshakeErrors += l.TLSHandshakeErrors
		st.TLSHandshakeTimeouts += l.TLSHandshakeTimeouts
		st.TLSRefused += l.TLSRefused
		st.BytesIn += l.BytesIn
		st.Conns += l.Conns
	}
	return st
}

// An echo handler over TLS sees plaintext and its writes are encrypted:
// messages from one byte to several records come back whole, on TLS 1.2
// and 1.3, for every cipher suite Go's client offers.
func TestTLSEcho(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		s := startTLS(t, b, place, echoHandler(), nil)
		type tc struct {
			name  string
			cfg   func(*tls.Config)
			sizes []int
		}
		cases := []tc{
			{"tls1.3", func(c *tls.Config) { c.MinVersion = tls.VersionTLS13 }, []int{1, 100, 16 << 10, 100 << 10}},
			{"tls1.2", func(c *tls.Config) { c.MaxVersion = tls.VersionTLS12 }, []int{1, 100, 16 << 10, 100 << 10}},
		}
		for _, cs := range tls.CipherSuites() {
			// The test certificate's key is ECDSA.
			if !cs.Insecure && slicesContains(cs.SupportedVersions, tls.VersionTLS12) && strings.Contains(cs.Name, "ECDSA") {
				id := cs.ID
				cases = append(cases, tc{"tls1.2/" + cs.Name, func(c *tls.Config) {
					c.MaxVersion = tls.VersionTLS12
					c.CipherSuites = []uint16{id}
				}, []int{1000}})
			}
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				cfg := testCert().ClientConfig("localhost")
				tc.cfg(cfg)
				c := dialTLS(t, s, cfg)
				for _, n := range tc.sizes {
					msg := bytes.Repeat([]byte{byte(n)}, n)
					for i := range msg {
						msg[i] += byte(i * 7)
					}
					_, err := c.Write(msg)
					require.NoError(t, err)
					got := make([]byte, n)
					_, err = io.ReadFull(c, got)
					require.NoError(t, err)
					require.Equal(t, msg, got)
				}
			})
		}
		require.Eventually(t, func() bool { return tlsTotals(s).TLSHandshakes == uint64(len(cases)) },
			5*time.Second, time.Millisecond)
	})
}

func slicesContains(s []uint16, v uint16) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// splitConn writes what a TLS client sends one byte at a time, each after
// the server has taken the byte before, so the server meets a record (and
// the handshake) split at every offset.
type splitConn struct {
	net.Conn
	t     *testing.T
	s     *Server
	armed bool
}

func (c *splitConn) Write(p []byte) (int, error) {
	if !c.armed {
		return c.Conn.Write(p)
	}
	for i := range p {
		before := tlsTotals(c.s).BytesIn
		if _, err := c.Conn.Write(p[i : i+1]); err != nil {
			return i, err
		}
		require.Eventually(c.t, func() bool { return tlsTotals(c.s).BytesIn > before },
			5*time.Second, 20*time.Microsecond, "the server never read byte %d", i)
	}
	return len(p), nil
}

// Records split at every byte offset, in the handshake and after it, are
// put together by the layer: crypto/tls resumes a record after the
// transport's would-block.
func TestTLSRecordsSplitAtEveryOffset(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		s := startTLS(t, b, place, echoHandler(), nil, WithLoops(1))
		for _, split := range []string{"handshake", "records"} {
			t.Run(split, func(t *testing.T) {
				raw, err := net.Dial("tcp", s.Addr().String())
				require.NoError(t, err)
				defer raw.Close()
				raw.SetDeadline(time.Now().Add(30 * time.Second))
				sc := &splitConn{Conn: raw, t: t, s: s, armed: split == "handshake"}
				cfg := testCert().ClientConfig("localhost")
				cfg.CurvePreferences = []tls.CurveID{tls.X25519} // a short ClientHello
				c := tls.Client(sc, cfg)
				require.NoError(t, c.Handshake())
				sc.armed = true
				requireEchoes(t, c, "hello", "a second record")
			})
		}
	})
}

// close_notify ends the plaintext stream both ways: the peer's reaches
// OnEOF while its TCP side is still open, and the handler's CloseWrite
// and Close send one before the FIN.
func TestTLSCloseNotify(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		var got bytes.Buffer
		h := &HandlerFuncs{
			Data: func(c *Conn) {
				p, _ := c.Next(-1)
				got.Write(p)
			},
			EOF: func(c *Conn) {
				c.Write([]byte("got " + got.String()))
				c.CloseWrite()
			},
		}
		s := startTLS(t, b, place, h, nil, WithLoops(1))
		cfg := testCert().ClientConfig("localhost")
		cfg.MaxVersion = tls.VersionTLS12 // its alerts are visible on the wire
		raw, err := net.Dial("tcp", s.Addr().String())
		require.NoError(t, err)
		defer raw.Close()
		raw.SetDeadline(time.Now().Add(10 * time.Second))
		rec := &recordingConn{Conn: raw}
		c := tls.Client(rec, cfg)
		_, err = io.WriteString(c, "ping")
		require.NoError(t, err)
		require.NoError(t, c.CloseWrite()) // close_notify, no FIN
		reply, err := io.ReadAll(c)
		require.NoError(t, err, "the server's close_notify ends the stream cleanly")
		require.Equal(t, "got ping", string(reply))
		// The last record the server sent is an alert (21): close_notify.
		recs := rec.records()
		require.NotEmpty(t, recs)
		require.Equal(t, byte(21), recs[len(recs)-1], "last record type")
	})
}

// recordingConn keeps what the server sent, to check its records.
type recordingConn struct {
	net.Conn
	mu  sync.Mutex
	buf []byte
}

func (r *recordingConn) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.mu.Lock()
	r.buf = append(r.buf, p[:n]...)
	r.mu.Unlock()
	return n, err
}

// records returns the content type of each whole record received.
func (r *recordingConn) records() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var types []byte
	for b := r.buf; len(b) >= 5; {
		n := 5 + int(b[3])<<8 + int(b[4])
		if len(b) < n {
			break
		}
		types = append(types, b[0])
		b = b[n:]
	}
	return types
}

// OnOpen runs after the handshake, and Conn.TLS shows its outcome: the
// version, the ALPN protocol chosen, the server name the client asked
// for, and the client's certificate under mTLS.
func TestTLSConnectionState(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		client, err := selfsigned.New(time.Hour, "client")
		require.NoError(t, err)
		states := make(chan *tls.ConnectionState, 1)
		alpn := make(chan string, 1)
		h := &HandlerFuncs{Open: func(c *Conn) {
			alpn <- c.NegotiatedProtocol()
			// Made once and kept: any goroutine gets the same state.
			st := c.TLS()
			other := make(chan *tls.ConnectionState)
			go func() { other <- c.TLS() }()
			if o := <-other; o != st {
				t.Errorf("TLS() from another goroutine gave %p, the loop %p", o, st)
			}
			states <- st
		}, Data: func(c *Conn) {
			p, _ := c.Next(-1)
			c.Write(p)
		}}
		scfg := testCert().ServerConfig()
		scfg.NextProtos = []string{"h2", "http/1.1"}
		scfg.ClientAuth = tls.VerifyClientCertIfGiven
		scfg.ClientCAs = client.Pool
		s := startTLS(t, b, place, h, scfg)

		ccfg := testCert().ClientConfig("localhost")
		ccfg.NextProtos = []string{"http/1.1"}
		ccfg.Certificates = []tls.Certificate{client.TLS}
		dialTLS(t, s, ccfg)
		st := <-states
		require.NotNil(t, st)
		require.True(t, st.HandshakeComplete)
		require.Equal(t, uint16(tls.VersionTLS13), st.Version)
		require.Equal(t, "http/1.1", st.NegotiatedProtocol)
		require.Equal(t, "http/1.1", <-alpn)
		require.Equal(t, "localhost", st.ServerName)
		require.Len(t, st.PeerCertificates, 1)
		require.Equal(t, "client", st.PeerCertificates[0].Subject.CommonName)

		// A plaintext connection has no TLS state.
		plain := startServer(t, b, h)
		pc, err := net.Dial("tcp", plain.Addr().String())
		require.NoError(t, err)
		defer pc.Close()
		require.Nil(t, <-states)
		require.Equal(t, "", <-alpn)
	})
}

// Client certificates under RequireAndVerifyClientCert: a valid one is
// accepted, a missing, expired or untrusted one fails the handshake with
// an alert, counted, and the handler never sees the connection.
func TestTLSClientCertificates(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		good, err := selfsigned.New(time.Hour, "good")
		require.NoError(t, err)
		expired, err := selfsigned.NewAt(time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour), "expired")
		require.NoError(t, err)
		stranger, err := selfsigned.New(time.Hour, "stranger")
		require.NoError(t, err)
		pool := x509.NewCertPool()
		pool.AddCert(good.Leaf)
		pool.AddCert(expired.Leaf)

		var opened sync.Map
		h := &HandlerFuncs{Open: func(c *Conn) { opened.Store(c.TLS().PeerCertificates[0].Subject.CommonName, true) },
			Data: func(c *Conn) {
				p, _ := c.Next(-1)
				c.Write(p)
			}}
		scfg := testCert().ServerConfig()
		scfg.ClientAuth = tls.RequireAndVerifyClientCert
		scfg.ClientCAs = pool
		s := startTLS(t, b, place, h, scfg, WithLoops(1))

		for _, tc := range []struct {
			name string
			cert *selfsigned.Cert
			ok   bool
		}{
			{"valid", good, true},
			{"none", nil, false},
			{"expired", expired, false},
			{"untrusted", stranger, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				cfg := testCert().ClientConfig("localhost")
				if tc.cert != nil {
					cfg.Certificates = []tls.Certificate{tc.cert.TLS}
				}
				raw, err := net.Dial("tcp", s.Addr().String())
				require.NoError(t, err)
				defer raw.Close()
				raw.SetDeadline(time.Now().Add(10 * time.Second))
				c := tls.Client(raw, cfg)
				// TLS 1.3 reports a rejected client certificate on the
				// first read after the handshake.
				_, err = io.WriteString(c, "x")
				if err == nil {
					_, err = io.ReadFull(c, make([]byte, 1))
				}
				if tc.ok {
					require.NoError(t, err)
					return
				}
				// The server's alert, or the close after it.
				require.Error(t, err)
				require.True(t, strings.Contains(err.Error(), "remote error: tls:") || errors.Is(err, io.EOF), "want an alert, got %v", err)
			})
		}
		require.Eventually(t, func() bool { return tlsTotals(s).TLSHandshakeErrors == 3 }, 5*time.Second, time.Millisecond)
		_, ok := opened.Load("good")
		require.True(t, ok)
		n := 0
		opened.Range(func(any, any) bool { n++; return true })
		require.Equal(t, 1, n, "a rejected client reached the handler")
	})
}

// A client that resumes a session skips the full handshake; session
// tickets work through the layer on both versions.
func TestTLSResumption(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		s := startTLS(t, b, place, echoHandler(), nil)
		for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			cfg := testCert().ClientConfig("localhost")
			cfg.MaxVersion = v
			cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
			for i := range 2 {
				c := dialTLS(t, s, cfg)
				// TLS 1.3 tickets arrive after the handshake: one round
				// trip takes them in.
				_, err := io.WriteString(c, "x")
				require.NoError(t, err)
				_, err = io.ReadFull(c, make([]byte, 1))
				require.NoError(t, err)
				require.Equal(t, i == 1, c.ConnectionState().DidResume, "version %x connection %d", v, i)
				c.Close()
			}
		}
	})
}

// Bad input during the handshake gets a clear, bounded answer: garbage
// instead of a ClientHello is answered with an alert and a close, a
// handshake that stalls is cut at the handshake timeout, and past the
// bound on concurrent handshakes a new connection is closed at once.
// Each is counted; the handler never sees any of them.
func TestTLSBadHandshakes(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		opened := make(chan struct{}, 10)
		h := &HandlerFuncs{Open: func(c *Conn) { opened <- struct{}{} }}
		s := startTLS(t, b, place, h, nil, WithLoops(1),
			WithTLSHandshakeTimeout(300*time.Millisecond), WithMaxTLSHandshakes(2))

		dial := func() net.Conn {
			c, err := net.Dial("tcp", s.Addr().String())
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			c.SetDeadline(time.Now().Add(10 * time.Second))
			return c
		}

		// Plain HTTP to a TLS port: closed (crypto/tls sends no alert to
		// what does not look like TLS); garbage that does gets an alert.
		g := dial()
		io.WriteString(g, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		reply, err := io.ReadAll(g)
		require.NoError(t, err, "closed with a FIN")
		require.Empty(t, reply)
		g2 := dial()
		g2.Write([]byte{22, 3, 1, 0, 4, 1, 0, 0, 0}) // a ClientHello of no body
		reply, err = io.ReadAll(g2)
		require.NoError(t, err)
		require.NotEmpty(t, reply)
		require.Equal(t, byte(21), reply[0], "an alert record")
		require.Eventually(t, func() bool { return tlsTotals(s).TLSHandshakeErrors == 2 }, 5*time.Second, time.Millisecond)

		// Two stalled handshakes (half a record) hold the two places...
		stalled := []net.Conn{dial(), dial()}
		for _, c := range stalled {
			c.Write([]byte{22, 3, 1, 0, 200, 1})
		}
		// ...so a third connection is refused at once.
		require.Eventually(t, func() bool { return tlsTotals(s).Conns == 2 }, 5*time.Second, time.Millisecond)
		third := dial()
		start := time.Now()
		_, err = io.ReadAll(third)
		if err != nil {
			require.NotErrorIs(t, err, error(nil))
		}
		require.Less(t, time.Since(start), 250*time.Millisecond, "refused, not timed out")
		require.Eventually(t, func() bool { return tlsTotals(s).TLSRefused == 1 }, 5*time.Second, time.Millisecond)

		// The stalled ones are cut at the handshake timeout.
		for _, c := range stalled {
			_, err := io.ReadAll(c)
			_ = err // a close or a reset, either ends the read
		}
		require.Eventually(t, func() bool { return tlsTotals(s).TLSHandshakeTimeouts == 2 }, 5*time.Second, time.Millisecond)
		require.Eventually(t, func() bool { return tlsTotals(s).Conns == 0 }, 5*time.Second, time.Millisecond)
		require.Empty(t, opened)

		// With the places free again, a real client is served.
		dialTLS(t, s, nil)
		<-opened
	})
}

// Splicing a TLS connection would move ciphertext: SpliceTo refuses it
// with ErrCannotSplice, changing nothing: the connection goes on echoing.
func TestTLSSpliceRefused(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		errs := make(chan error, 1)
		var first *Conn
		h := &HandlerFuncs{
			Open: func(c *Conn) {
				if first == nil {
					first = c
				}
			},
			Data: func(c *Conn) {
				if c != first {
					errs <- c.SpliceTo(first)
				}
				p, _ := c.Next(-1)
				c.Write(p)
			}}
		s := startTLS(t, b, place, h, nil, WithLoops(1))
		c1 := dialTLS(t, s, nil)
		io.WriteString(c1, "1")
		_, err := io.ReadFull(c1, make([]byte, 1))
		require.NoError(t, err)
		c2 := dialTLS(t, s, nil)
		io.WriteString(c2, "2")
		require.ErrorIs(t, <-errs, ErrCannotSplice)
		got := make([]byte, 1)
		_, err = io.ReadFull(c2, got)
		require.NoError(t, err)
		require.Equal(t, "2", string(got))
	})
}

// A flood of 1,000 concurrent handshakes against a bound of 64: every
// client is either served or refused at once (none hangs), the counters
// add up, no connection is left behind, and a connection established
// before the flood keeps being served on the same loop throughout. (Its
// latency is a benchmark's business; the bound here only catches a loop
// stalled for good.)
func TestTLSHandshakeFlood(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		const clients = 1000
		s := startTLS(t, b, place, echoHandler(), nil, WithLoops(1), WithMaxTLSHandshakes(64))
		ping := dialTLS(t, s, nil)
		stop := make(chan struct{})
		pinged := make(chan error, 1)
		var worst time.Duration
		go func() {
			buf := make([]byte, 4)
			for n := 0; ; n++ {
				select {
				case <-stop:
					pinged <- nil
					return
				default:
				}
				start := time.Now()
				ping.SetDeadline(start.Add(10 * time.Second))
				if _, err := ping.Write([]byte("ping")); err != nil {
					pinged <- err
					return
				}
				if _, err := io.ReadFull(ping, buf); err != nil {
					pinged <- err
					return
				}
				worst = max(worst, time.Since(start))
			}
		}()

		var wg sync.WaitGroup
		var mu sync.Mutex
		served, refused := 0, 0
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				raw, err := net.Dial("tcp", s.Addr().String())
				if err != nil {
					t.Error(err)
					return
				}
				defer raw.Close()
				raw.SetDeadline(time.Now().Add(30 * time.Second))
				err = tls.Client(raw, testCert().ClientConfig("localhost")).Handshake()
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					served++
				case errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset"):
					refused++ // closed before any handshake work
				default:
					t.Errorf("handshake: %v", err)
				}
			}()
		}
		wg.Wait()
		close(stop)
		require.NoError(t, <-pinged)
		t.Logf("%s: %d served, %d refused; the established connection's worst round trip during the flood: %v", b, served, refused, worst)
		require.Equal(t, clients, served+refused)
		require.Positive(t, served)
		require.Eventually(t, func() bool {
			st := tlsTotals(s)
			return st.Conns == 1 && st.TLSHandshakes == uint64(served)+1 && st.TLSRefused == uint64(refused)
		}, 10*time.Second, time.Millisecond, "%+v", tlsTotals(s))
		require.Less(t, worst, 5*time.Second, "the loop stalled during the flood")
	})
}

// tlsEchoPeer is a crypto/tls echo server on 127.0.0.1, the peer of the
// DialTLS tests; it reports each connection's negotiated server name.
func tlsEchoPeer(t *testing.T, cfg *tls.Config) (addr string, names chan string) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	names = make(chan string, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := c.(*tls.Conn)
				if tc.Handshake() != nil {
					return
				}
				names <- tc.ConnectionState().ServerName
				io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String(), names
}

// A loop dials out over TLS: what the handler writes before the handshake
// is done is encrypted and sent after it, OnOpen runs once the handshake
// is done (Conn.TLS shows it), and the echo comes back decrypted. The
// waiting form returns after the handshake.
func TestDialTLS(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		addr, names := tlsEchoPeer(t, testCert().ServerConfig())
		s := startServer(t, b, echoHandler())
		got := make(chan string, 1)
		opened := make(chan *tls.ConnectionState, 1)
		h := &HandlerFuncs{
			Open: func(c *Conn) { opened <- c.TLS() },
			Data: func(c *Conn) {
				if c.Buffered() >= len("early+late") {
					p, _ := c.Next(-1)
					got <- string(p)
				}
			},
		}
		l := s.Loops()[0]
		dialed := make(chan *Conn, 1)
		require.NoError(t, l.Post(func() {
			cfg := &tls.Config{RootCAs: testCert().Pool}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := l.DialTLS(ctx, "tcp", "localhost"+addr[strings.LastIndex(addr, ":"):], cfg, h)
			dialed <- c
			if err != nil {
				t.Error(err)
				return
			}
			if c.TLS() != nil {
				t.Error("TLS() before the handshake is done")
			}
			c.Write([]byte("early+"))
			c.AfterFunc(0, func() { c.Write([]byte("late")) })
		}))
		first := <-dialed
		// The peer echoes until it is closed: close ours so the server
		// can shut down.
		t.Cleanup(func() { l.Post(func() { first.Close() }) })
		st := <-opened
		require.NotNil(t, st)
		require.Equal(t, "localhost", st.ServerName)
		require.Equal(t, "localhost", <-names)
		require.Equal(t, "early+late", <-got)

		// The waiting form, from another goroutine.
		c, err := s.DialTLS(context.Background(), "tcp", addr, testCert().ClientConfig("localhost"), echoHandler())
		require.NoError(t, err)
		t.Cleanup(func() { c.Loop().Post(func() { c.Close() }) })
		require.NotNil(t, c.TLS())
		require.Equal(t, "localhost", <-names)
	})
}

// A TLS dial whose handshake fails (the server's certificate does not
// cover the name asked for) closes with an error wrapping ErrTLS; the
// handler never sees OnOpen, and the waiting form returns the error.
func TestDialTLSFails(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		addr, _ := tlsEchoPeer(t, testCert().ServerConfig())
		s := startServer(t, b, echoHandler())
		opened := make(chan struct{}, 1)
		h := &HandlerFuncs{Open: func(c *Conn) { opened <- struct{}{} }}
		_, err := s.DialTLS(context.Background(), "tcp", addr, testCert().ClientConfig("wrong.example"), h)
		require.ErrorIs(t, err, ErrTLS)
		var verr *tls.CertificateVerificationError
		require.ErrorAs(t, err, &verr)
		require.Empty(t, opened)
	})
}

// GetCertificate picks the certificate by the name the client asks for
// (SNI), and a certificate swapped in while the server runs is served to
// the next handshake: reloading without a restart.
func TestTLSGetCertificate(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		certs := map[string]*selfsigned.Cert{}
		for _, name := range []string{"a.test", "b.test"} {
			c, err := selfsigned.New(time.Hour, name)
			require.NoError(t, err)
			certs[name] = c
		}
		var mu sync.Mutex
		cfg := &tls.Config{GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			mu.Lock()
			defer mu.Unlock()
			if c, ok := certs[hello.ServerName]; ok {
				return &c.TLS, nil
			}
			return nil, errors.New("no certificate for " + hello.ServerName)
		}}
		s := startTLS(t, b, place, echoHandler(), cfg)
		leaf := func(name string) string {
			c := dialTLS(t, s, certs[name].ClientConfig(name))
			return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
		}
		require.Equal(t, certs["a.test"].Leaf.SerialNumber.String(), leaf("a.test"))
		require.Equal(t, certs["b.test"].Leaf.SerialNumber.String(), leaf("b.test"))

		renewed, err := selfsigned.New(2*time.Hour, "a.test")
		require.NoError(t, err)
		mu.Lock()
		old := certs["a.test"]
		certs["a.test"] = renewed
		mu.Unlock()
		require.Equal(t, renewed.Leaf.SerialNumber.String(), leaf("a.test"))
		require.NotEqual(t, old.Leaf.SerialNumber, renewed.Leaf.SerialNumber)
	})
}

// The write water marks count ciphertext: a TLS client that sends 8 MiB
// to an echo and reads nothing until the server stopped reading leaves
// the connection's output near the high-water mark, and every byte then
// comes back, in order.
func TestTLSSlowReaderBoundsOutput(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		const size, high = 8 << 20, 64 << 10
		s := startTLS(t, b, place, echoHandler(), nil, WithLoops(1), WithWriteWaterMarks(high/2, high))
		c := dialTLS(t, s, nil)
		c.SetDeadline(time.Now().Add(60 * time.Second))
		msg := make([]byte, size)
		for i := range msg {
			msg[i] = byte(i*7 + i>>12)
		}
		wrote := make(chan error, 1)
		go func() {
			_, err := c.Write(msg)
			wrote <- err
		}()
		// Wait until the server's input stops growing: it paused.
		var last uint64
		stable := 0
		require.Eventually(t, func() bool {
			in := tlsTotals(s).BytesIn
			if in == last && in > 0 {
				stable++
			} else {
				stable = 0
			}
			last = in
			return stable >= 5
		}, 30*time.Second, 50*time.Millisecond)
		peak := s.Stats()[0].PeakConnOutput
		t.Logf("%s: server took %d KiB before pausing; peak pending output %d KiB, held input %d KiB",
			b, last>>10, peak>>10, s.Stats()[0].PeakConnInput>>10)
		// Above the mark by at most the echo of one input report's records.
		require.LessOrEqual(t, peak, int64(high+96<<10))
		got := make([]byte, size)
		_, err := io.ReadFull(c, got)
		require.NoError(t, err)
		require.NoError(t, <-wrote)
		require.True(t, bytes.Equal(msg, got), "echo differs")
	})
}

// Handshakes the server's configuration rules out end with the alert that
// says why, counted, and the handler never sees them: a protocol the
// client offers that the server does not speak (ALPN), a version below
// the server's MinVersion.
func TestTLSRefusedHandshakes(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		opened := make(chan struct{}, 4)
		scfg := testCert().ServerConfig()
		scfg.NextProtos = []string{"h2", "http/1.1"}
		scfg.MinVersion = tls.VersionTLS13
		s := startTLS(t, b, place, &HandlerFuncs{Open: func(*Conn) { opened <- struct{}{} }}, scfg, WithLoops(1))
		for i, tc := range []struct {
			name  string
			cfg   func(*tls.Config)
			alert string
		}{
			{"alpn", func(c *tls.Config) { c.NextProtos = []string{"smtp"} }, "no application protocol"},
			{"version", func(c *tls.Config) { c.MaxVersion = tls.VersionTLS12 }, "protocol version"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				raw, err := net.Dial("tcp", s.Addr().String())
				require.NoError(t, err)
				defer raw.Close()
				raw.SetDeadline(time.Now().Add(10 * time.Second))
				cfg := testCert().ClientConfig("localhost")
				tc.cfg(cfg)
				err = tls.Client(raw, cfg).Handshake()
				require.ErrorContains(t, err, tc.alert)
				require.Eventually(t, func() bool { return tlsTotals(s).TLSHandshakeErrors == uint64(i+1) },
					5*time.Second, time.Millisecond)
			})
		}
		require.Empty(t, opened)
	})
}

// A record longer than TLS allows, after the handshake, is answered with
// record_overflow and the connection closes with ErrTLS.
func TestTLSOversizedRecord(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		closed := make(chan error, 1)
		s := startTLS(t, b, place, &HandlerFuncs{Close: func(c *Conn, err error) { closed <- err }}, nil)
		raw, err := net.Dial("tcp", s.Addr().String())
		require.NoError(t, err)
		defer raw.Close()
		raw.SetDeadline(time.Now().Add(10 * time.Second))
		c := tls.Client(raw, testCert().ClientConfig("localhost"))
		require.NoError(t, c.Handshake())
		// Application data, 18,433 bytes announced: past 2^14 + 256.
		_, err = raw.Write([]byte{23, 3, 3, 0x48, 0x01, 0, 0, 0})
		require.NoError(t, err)
		_, err = c.Read(make([]byte, 1))
		require.ErrorContains(t, err, "record overflow")
		require.ErrorIs(t, <-closed, ErrTLS)
	})
}

// A peer that connects to a TLS server and says nothing costs no
// goroutine (the handshake's starts with the first ciphertext), and one
// that closes without a word is closed at once, not counted as a failed
// handshake.
func TestTLSSilentPeersCostNoGoroutine(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		if b == BackendPortable {
			t.Skip("the portable backend has a goroutine per connection by design (a watcher; a reader on Windows)")
		}
		const n = 100
		s := startTLS(t, b, place, echoHandler(), nil, WithLoops(1))
		before := runtime.NumGoroutine()
		conns := make([]net.Conn, n)
		for i := range conns {
			c, err := net.Dial("tcp", s.Addr().String())
			require.NoError(t, err)
			conns[i] = c
		}
		require.Eventually(t, func() bool { return tlsTotals(s).Conns == n }, 5*time.Second, time.Millisecond)
		require.Less(t, runtime.NumGoroutine()-before, n/2, "silent peers hold goroutines")
		for _, c := range conns {
			c.Close()
		}
		require.Eventually(t, func() bool { return tlsTotals(s).Conns == 0 }, 5*time.Second, time.Millisecond)
		st := tlsTotals(s)
		require.Zero(t, st.TLSHandshakeErrors+st.TLSHandshakeTimeouts)
		dialTLS(t, s, nil) // and the server still serves
	})
}

// deafConn sends what its TLS client writes but never gives it the
// server's answer: the client sends its ClientHello and then waits
// forever, so it never sends Finished.
type deafConn struct {
	net.Conn
	closed chan struct{}
}

func (d *deafConn) Read([]byte) (int, error) {
	<-d.closed
	return 0, net.ErrClosed
}

// A client that sends its ClientHello and never its Finished holds a
// handshake until the handshake timeout, then is closed and counted; the
// handler never sees it.
func TestTLSClientNeverFinishes(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		opened := make(chan struct{}, 1)
		s := startTLS(t, b, place, &HandlerFuncs{Open: func(*Conn) { opened <- struct{}{} }}, nil,
			WithLoops(1), WithTLSHandshakeTimeout(300*time.Millisecond))
		raw, err := net.Dial("tcp", s.Addr().String())
		require.NoError(t, err)
		d := &deafConn{Conn: raw, closed: make(chan struct{})}
		done := make(chan error, 1)
		go func() { done <- tls.Client(d, testCert().ClientConfig("localhost")).Handshake() }()
		require.Eventually(t, func() bool { return tlsTotals(s).TLSHandshakeTimeouts == 1 }, 5*time.Second, time.Millisecond)
		require.Eventually(t, func() bool { return tlsTotals(s).Conns == 0 }, 5*time.Second, time.Millisecond)
		close(d.closed)
		raw.Close()
		require.Error(t, <-done)
		require.Empty(t, opened)
	})
}

// Where handshakes run: on the loop unless the config has a callback that
// might block, and WithTLSHandshakeOffLoop decides when given.
func TestTLSHandshakePlacement(t *testing.T) {
	getCert := func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return nil, nil }
	cases := []struct {
		name  string
		cfg   *tls.Config
		where handshakePlace
		want  bool
	}{
		{"certificates", &tls.Config{Certificates: []tls.Certificate{{}}}, placeAuto, true},
		{"GetCertificate", &tls.Config{GetCertificate: getCert}, placeAuto, false},
		{"VerifyConnection", &tls.Config{VerifyConnection: func(tls.ConnectionState) error { return nil }}, placeAuto, false},
		{"KeyLogWriter", &tls.Config{KeyLogWriter: io.Discard}, placeAuto, false},
		{"GetCertificate forced on", &tls.Config{GetCertificate: getCert}, placeOnLoop, true},
		{"certificates forced off", &tls.Config{Certificates: []tls.Certificate{{}}}, placeOffLoop, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, tc.where.onLoop(tc.cfg))
		})
	}
	// And the handshake really runs where it is placed: a GetCertificate
	// sees the loop's thread or another.
	forEachBackend(t, func(t *testing.T, b Backend) {
		for _, off := range []bool{false, true} {
			var onLoop atomic.Bool
			var srv atomic.Pointer[Server] // set before any client connects
			cfg := &tls.Config{GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				onLoop.Store(srv.Load().loops[0].InLoop())
				return &testCert().TLS, nil
			}}
			s := startTLS(t, b, WithTLSHandshakeOffLoop(off), echoHandler(), cfg, WithLoops(1))
			srv.Store(s)
			dialTLS(t, s, nil)
			require.Equal(t, !off, onLoop.Load(), "WithTLSHandshakeOffLoop(%v)", off)
		}
	})
}

// A tls.Config callback that panics fails its handshake, is counted and
// logged as a panic, and the server goes on serving.
func TestTLSHandshakePanic(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		cfg := &tls.Config{GetCertificate: func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
			if hello.ServerName == "boom.test" {
				panic("no certificate today")
			}
			return &testCert().TLS, nil
		}}
		s := startTLS(t, b, place, echoHandler(), cfg, WithLoops(1))
		raw, err := net.Dial("tcp", s.Addr().String())
		require.NoError(t, err)
		defer raw.Close()
		raw.SetDeadline(time.Now().Add(10 * time.Second))
		require.Error(t, tls.Client(raw, testCert().ClientConfig("boom.test")).Handshake())
		require.Eventually(t, func() bool {
			st := tlsTotals(s)
			return st.TLSHandshakeErrors == 1 && s.Stats()[0].Panics == 1
		}, 5*time.Second, time.Millisecond)

		c := dialTLS(t, s, nil)
		_, err = c.Write([]byte("still here"))
		require.NoError(t, err)
		got := make([]byte, 10)
		_, err = io.ReadFull(c, got)
		require.NoError(t, err)
		require.Equal(t, "still here", string(got))
	})
}

// helloRecorder is a net.Conn that keeps what a TLS client writes (its
// ClientHello) and fails the client's first read.
type helloRecorder struct {
	net.Conn
	hello []byte
}

func (r *helloRecorder) Write(p []byte) (int, error) {
	r.hello = append(r.hello, p...)
	return len(p), nil
}
func (r *helloRecorder) Read([]byte) (int, error) { return 0, io.ErrClosedPipe }

// clientHello returns the first flight of Go's TLS client for localhost.
func clientHello(t *testing.T) []byte {
	rec := &helloRecorder{}
	require.Error(t, tls.Client(rec, testCert().ClientConfig("localhost")).Handshake())
	require.NotEmpty(t, rec.hello)
	return rec.hello
}

// Handshakes leave nothing running once the server stops: finished ones,
// and ones cut halfway (the client sent its ClientHello and never
// answered), whether their coroutines or goroutines were waiting.
func TestTLSHandshakesLeaveNoGoroutine(t *testing.T) {
	hello := clientHello(t)
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		before := runtime.NumGoroutine()
		s := startTLS(t, b, place, echoHandler(), nil, WithLoops(1))
		for range 10 {
			dialTLS(t, s, nil).Close()
		}
		const stalled = 20
		in := tlsTotals(s).BytesIn
		for range stalled {
			c, err := net.Dial("tcp", s.Addr().String())
			require.NoError(t, err)
			t.Cleanup(func() { c.Close() })
			_, err = c.Write(hello)
			require.NoError(t, err)
		}
		require.Eventually(t, func() bool { return tlsTotals(s).BytesIn >= in+uint64(stalled*len(hello)) },
			5*time.Second, time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		require.ErrorIs(t, s.Shutdown(ctx), context.DeadlineExceeded) // the stalled ones are cut
		// +1: Eventually evaluates the condition on a goroutine of its own.
		if !assert.Eventually(t, func() bool { return runtime.NumGoroutine() <= before+1 }, 5*time.Second, time.Millisecond) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
		}
	})
}

// coalescingConn holds what a TLS client writes once it has read
// anything (its second flight: Finished) until flush, so the server gets
// the client's Finished and its first records in one segment.
type coalescingConn struct {
	net.Conn
	read bool
	held []byte
}

func (c *coalescingConn) Read(p []byte) (int, error) {
	c.read = true
	return c.Conn.Read(p)
}

func (c *coalescingConn) Write(p []byte) (int, error) {
	if !c.read {
		return c.Conn.Write(p)
	}
	c.held = append(c.held, p...)
	return len(p), nil
}

func (c *coalescingConn) flush() error {
	_, err := c.Conn.Write(c.held)
	c.held = nil
	return err
}

// Records that arrive with the client's Finished, in the same segment,
// are all delivered after the hand-over: the handshake leaves them to the
// loop instead of pulling them into crypto/tls, where no input report
// would come to ask for them.
func TestTLSRecordsWithFinished(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		s := startTLS(t, b, place, echoHandler(), nil, WithLoops(1))
		raw, err := net.Dial("tcp", s.Addr().String())
		require.NoError(t, err)
		defer raw.Close()
		raw.SetDeadline(time.Now().Add(10 * time.Second))
		cc := &coalescingConn{Conn: raw}
		cfg := testCert().ClientConfig("localhost")
		cfg.MinVersion = tls.VersionTLS13 // the client's Finished is its last handshake flight
		c := tls.Client(cc, cfg)
		require.NoError(t, c.Handshake())
		var want []byte
		for i := range 3 { // three records after the Finished
			msg := bytes.Repeat([]byte{'a' + byte(i)}, 100+i)
			want = append(want, msg...)
			_, err := c.Write(msg)
			require.NoError(t, err)
		}
		require.NoError(t, cc.flush())
		got := make([]byte, len(want))
		_, err = io.ReadFull(c, got)
		require.NoError(t, err)
		require.Equal(t, want, got)
	})
}

// recordCut never passes the end of a record, whatever the chunks the
// stream arrives in and the room each Read offers, and says so at every
// boundary.
func TestRecordCut(t *testing.T) {
	record := func(n int) []byte {
		r := []byte{23, 3, 3, byte(n >> 8), byte(n)}
		return append(r, bytes.Repeat([]byte{0xee}, n)...)
	}
	var stream []byte
	var ends []int // offsets where a record ends
	for _, n := range []int{1, 0, 300, 16384 + 256, 7} {
		stream = append(stream, record(n)...)
		ends = append(ends, len(stream))
	}
	for _, chunk := range []int{1, 2, 5, 6, 100, 1 << 20} {
		for _, room := range []int{1, 3, 512, 1 << 20} {
			var rc recordCut
			buf := make([]byte, room)
			off, e := 0, 0
			for off < len(stream) {
				in := stream[off:min(off+chunk, len(stream))]
				for len(in) > 0 {
					n := rc.take(buf, in)
					require.Positive(t, n)
					in, off = in[n:], off+n
					require.LessOrEqual(t, off, ends[e], "chunk %d room %d: passed the end of record %d", chunk, room, e)
					if off == ends[e] {
						require.True(t, rc.atBoundary())
						e++
					} else {
						require.False(t, rc.atBoundary(), "chunk %d room %d: offset %d is inside record %d", chunk, room, off, e)
					}
				}
			}
			require.Equal(t, len(ends), e)
		}
	}
}

// requireEchoes writes each message to c and requires it back whole.
func requireEchoes(t *testing.T, c io.ReadWriter, msgs ...string) {
	t.Helper()
	for _, msg := range msgs {
		_, err := io.WriteString(c, msg)
		require.NoError(t, err)
		got := make([]byte, len(msg))
		_, err = io.ReadFull(c, got)
		require.NoError(t, err)
		require.Equal(t, msg, string(got))
	}
}

// A client whose ALPN offer shares no protocol with the server's gets
// the no_application_protocol alert (RFC 7301 §3.2); the handshake is
// counted as failed and the handler never sees the connection.
func TestTLSWrongALPN(t *testing.T) {
	forEachTLSPlacement(t, func(t *testing.T, b Backend, place Option) {
		opened := make(chan struct{}, 1)
		scfg := testCert().ServerConfig()
		scfg.NextProtos = []string{"h2", "http/1.1"}
		s := startTLS(t, b, place, &HandlerFuncs{Open: func(*Conn) { opened <- struct{}{} }}, scfg, WithLoops(1))
		raw, err := net.Dial("tcp", s.Addr().String())
		require.NoError(t, err)
		defer raw.Close()
		raw.SetDeadline(time.Now().Add(10 * time.Second))
		ccfg := testCert().ClientConfig("localhost")
		ccfg.NextProtos = []string{"spdy/3"}
		err = tls.Client(raw, ccfg).Handshake()
		require.ErrorContains(t, err, "no application protocol")
		require.Eventually(t, func() bool { return tlsTotals(s).TLSHandshakeErrors == 1 }, 5*time.Second, time.Millisecond)
		require.Empty(t, opened)
	})
}

// A TLS server's loops receive into buffers that hold a whole record (a
// 16 KiB record is 16,406 bytes with TLS 1.3's AES-GCM), unless the
// configuration sets a size; a plaintext server keeps 16 KiB. Full
// records echo whole with each size.
func TestTLSRecvBufferSize(t *testing.T) {
	cases := []struct {
		name string
		tls  bool
		cfg  Config
		want int
	}{
		{"plaintext", false, Config{}, 16 << 10},
		{"tls", true, Config{}, tlsRecvBufferSize},
		{"tls, set", true, Config{RecvBufferSize: 8 << 10}, 8 << 10},
		{"tls, set to 16 KiB", true, Config{RecvBufferSize: 16 << 10}, 16 << 10},
	}
	require.GreaterOrEqual(t, tlsRecvBufferSize, recordHeaderLen+tlsMaxRecord+256, "a TLS 1.3 record's largest size (RFC 8446 §5.2)")
	forEachBackend(t, func(t *testing.T, b Backend) {
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				opts := []Option{WithLoopConfig(tc.cfg)}
				if tc.tls {
					opts = append(opts, WithTLS(testCert().ServerConfig()))
				}
				s := startServer(t, b, echoHandler(), opts...)
				for _, l := range s.Loops() {
					assert.Equal(t, tc.want, l.cfg.RecvBufferSize)
				}
				if !tc.tls {
					return
				}
				cfg := testCert().ClientConfig("localhost")
				cfg.DynamicRecordSizingDisabled = true // every write one full record
				c := dialTLS(t, s, cfg)
				for i := range 32 {
					requireEchoes(t, c, strings.Repeat(string(rune('a'+i%26)), 16<<10))
				}
			})
		}
	})
}

// An on-loop DialTLS that fails, at the handshake or at the connect,
// reports it to the dialer's handler with OnClose (no OnOpen): a caller
// on the loop has no other way to learn that its connection is gone.
func TestDialTLSOnLoopFailureCloses(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b Backend) {
		addr, _ := tlsEchoPeer(t, testCert().ServerConfig())
		refused, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		deadAddr := refused.Addr().String()
		refused.Close()
		s := startServer(t, b, echoHandler())
		l := s.Loops()[0]
		for _, tc := range []struct{ name, addr string }{{"handshake", addr}, {"connect", deadAddr}} {
			closed := make(chan error, 1)
			opened := make(chan struct{}, 1)
			h := &HandlerFuncs{
				Open:  func(c *Conn) { opened <- struct{}{} },
				Close: func(c *Conn, err error) { closed <- err },
			}
			require.NoError(t, l.Post(func() {
				if _, err := l.DialTLS(context.Background(), "tcp", tc.addr, testCert().ClientConfig("wrong.example"), h); err != nil {
					closed <- err
				}
			}))
			select {
			case err := <-closed:
				require.Error(t, err, tc.name)
				if tc.name == "handshake" {
					require.ErrorIs(t, err, ErrTLS)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: the handler never saw OnClose", tc.name)
			}
			require.Empty(t, opened)
		}
	})
}
