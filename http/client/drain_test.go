package client

import (
	"bufio"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	vnet "github.com/veloq/veloq/net"
)

// slowUpstream answers "/slow" with a 10-byte body: the head and the
// first 5 bytes once release is closed, the rest once rest is; anything
// else with "ok" at once, each on the connection it came on. got is
// signalled when "/slow" arrived, and conns counts the connections
// accepted.
func slowUpstream(t *testing.T, got chan<- struct{}, release, rest <-chan struct{}, conns *atomic.Int32) string {
	return rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
		conns.Add(1)
		for {
			r, err := readReq(br)
			if err != nil {
				return
			}
			if r.URL.Path != "/slow" {
				c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
				continue
			}
			got <- struct{}{}
			<-release
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n01234"))
			<-rest
			c.Write([]byte("56789"))
		}
	})
}

// A call cancelled before its answer came, in the middle of a short
// body or at its last part, is counted as cancelled, not as an error,
// and its connection reads the rest of the answer and serves the next
// request: no new connection is made for it.
func TestCancelDrainsShortRest(t *testing.T) {
	for _, when := range []string{"before the head", "in the body", "at the end"} {
		t.Run(when, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b vnet.Backend) {
				got, release, rest := make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
				var conns atomic.Int32
				addr := slowUpstream(t, got, release, rest, &conns)
				var once1, once2 sync.Once
				free := func() { once1.Do(func() { close(release) }) }
				freeRest := func() { once2.Do(func() { close(rest) }) }
				t.Cleanup(func() { free(); freeRest() }) // before the upstream's cleanup waits for it
				l := newLoop(t, b)
				c := newClient(t, l)
				r := &recorder{}
				var call atomic.Pointer[Call]
				switch when {
				case "in the body":
					r.onBody = func(call *Call, p []byte) { call.Cancel() }
				case "at the end":
					r.onBody = func(call *Call, p []byte) {
						if p[len(p)-1] == '9' {
							call.Cancel()
						}
					}
				}
				require.NoError(t, l.Post(func() { call.Store(c.Send(l, &Request{Method: "GET", Addr: addr, Target: "/slow"}, r)) }))
				<-got
				if when == "before the head" {
					require.NoError(t, l.Post(func() { call.Load().Cancel() }))
					require.Eventually(t, r.done, 10*time.Second, time.Millisecond)
				}
				free()
				if when == "in the body" {
					require.Eventually(t, r.done, 10*time.Second, time.Millisecond)
				}
				freeRest()
				require.Eventually(t, r.done, 10*time.Second, time.Millisecond)
				require.ErrorIs(t, r.err, ErrCanceled)
				require.Eventually(t, func() bool { u := upOf(c); return u.Drained == 1 && u.Idle == 1 }, 10*time.Second, time.Millisecond)

				r2 := send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"})
				require.NoError(t, r2.err)
				require.Equal(t, "ok", r2.body.String())
				st := c.Stats()
				require.EqualValues(t, 1, st.NewConns, "the cancelled call's connection served the next request")
				require.EqualValues(t, 1, conns.Load())
				require.EqualValues(t, 1, st.Canceled)
				require.Zero(t, st.Errors, "a cancellation is not an error")
				require.Equal(t, 1, upOf(c).Open)
			})
		})
	}
}

// A cancelled call whose answer has more than the drain's bound to come
// closes its connection at once.
func TestCancelClosesLongRest(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
			if _, err := readReq(br); err != nil {
				return
			}
			c.Write([]byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\nab", 1<<20)))
			br.ReadByte() // until the client closes
		})
		l := newLoop(t, b)
		c := newClient(t, l)
		r := &recorder{}
		r.onBody = func(call *Call, p []byte) { call.Cancel() }
		sendWith(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"}, r)
		require.ErrorIs(t, r.err, ErrCanceled)
		require.Eventually(t, func() bool { return upOf(c).Open == 0 }, drainTimeout/2, time.Millisecond)
		st := c.Stats()
		require.Zero(t, st.Drained)
		require.Zero(t, st.Errors)
		require.EqualValues(t, 1, st.Canceled)
	})
}

// A call cancelled before its head came drains no more than the bound:
// a head announcing a long body, or a chunked one, ends the drain and
// closes the connection.
func TestDrainEndsOnLongHead(t *testing.T) {
	heads := map[string]string{
		"long":    fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", maxDrainBytes+1),
		"chunked": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
	}
	for name, head := range heads {
		t.Run(name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b vnet.Backend) {
				got, release := make(chan struct{}, 1), make(chan struct{})
				addr := rawUpstream(t, func(c net.Conn, br *bufio.Reader, i int) {
					if _, err := readReq(br); err != nil {
						return
					}
					got <- struct{}{}
					<-release
					c.Write([]byte(head))
					br.ReadByte() // until the client closes
				})
				var once sync.Once
				free := func() { once.Do(func() { close(release) }) }
				t.Cleanup(free) // before the upstream's cleanup waits for it
				l := newLoop(t, b)
				c := newClient(t, l)
				r := &recorder{}
				var call atomic.Pointer[Call]
				require.NoError(t, l.Post(func() { call.Store(c.Send(l, &Request{Method: "GET", Addr: addr, Target: "/"}, r)) }))
				<-got
				require.NoError(t, l.Post(func() { call.Load().Cancel() }))
				require.Eventually(t, r.done, 10*time.Second, time.Millisecond)
				require.Equal(t, 1, upOf(c).Draining)
				free()
				require.Eventually(t, func() bool { return upOf(c).Open == 0 }, drainTimeout/2, time.Millisecond)
				u := upOf(c)
				require.Zero(t, u.Drained)
				require.Zero(t, u.Draining)
				require.Zero(t, u.Errs, "the drain's end is no error")
				require.EqualValues(t, 1, u.Canceled)
			})
		})
	}
}

// A connection draining a cancelled call's answer gives way to a call
// that waits for a connection: the drain does not hold it up.
func TestDrainGivesWayToWaitingCall(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b vnet.Backend) {
		got, release, rest := make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		var conns atomic.Int32
		addr := slowUpstream(t, got, release, rest, &conns)
		t.Cleanup(func() { close(release); close(rest) }) // before the upstream's cleanup waits for it
		l := newLoop(t, b)
		c := newClient(t, l, WithMaxConnsPerHost(1), withDrainTimeout(time.Minute)) // the wait would outlast the test
		r := &recorder{}
		var call atomic.Pointer[Call]
		require.NoError(t, l.Post(func() { call.Store(c.Send(l, &Request{Method: "GET", Addr: addr, Target: "/slow"}, r)) }))
		<-got
		require.NoError(t, l.Post(func() { call.Load().Cancel() }))
		require.Eventually(t, r.done, 10*time.Second, time.Millisecond)
		require.Equal(t, 1, upOf(c).Draining)

		r2 := send(t, c, l, &Request{Method: "GET", Addr: addr, Target: "/"})
		require.NoError(t, r2.err)
		require.Equal(t, "ok", r2.body.String())
		u := upOf(c)
		require.Zero(t, u.Draining)
		require.Zero(t, u.Drained)
		require.EqualValues(t, 2, u.NewConns)
	})
}

// withDrainTimeout sets how long a cancelled call's drain may take
// (default drainTimeout).
func withDrainTimeout(d time.Duration) Option { return func(o *options) { o.drainTimeout = d } }
