package websocket

import (
	"bytes"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/veloq/veloq/internal/backendtest"
	vnet "github.com/veloq/veloq/net"
)

// Several clients at once each send a long random stream — messages of
// random sizes (some above the 64 KiB wait limit, so streamed), split into
// random fragments with pings between them — written in random-sized
// pieces. Every echo and pong must come back whole and in order: the
// decoder's state must survive any cut of the input, on both backends'
// way of presenting it (io_uring's provided buffers, epoll's reads).
func TestRandomStreamsOverSockets(t *testing.T) {
	backendtest.Run(t, func(t *testing.T, b vnet.Backend) {
		srv, _ := startWS(t, b, echoHandler(&events{}), WithMessageLimits(256<<10, 512<<10))
		const clients, messages = 6, 60
		var wg sync.WaitGroup
		for ci := range clients {
			r := rand.New(rand.NewPCG(uint64(ci), 99))
			c := dialWS(t, srv.Addr().String())
			// Build the stream and the replies it must produce.
			var stream []byte
			var want []frame
			for m := range messages {
				size := r.IntN(2000)
				if m%10 == 9 {
					size = 70000 + r.IntN(100000) // streamed through the assembly buffer
				}
				op := OpBinary
				if r.IntN(2) == 0 {
					op = OpText
				}
				// Text mixes 1- to 4-byte code points, so fragment cuts
				// fall inside them; binary is any bytes.
				var payload []byte
				runes := []string{"a", "é", "€", "𝄞"}
				for len(payload) < size {
					if op == OpText {
						payload = append(payload, runes[r.IntN(len(runes))]...)
					} else {
						payload = append(payload, byte(r.IntN(256)))
					}
				}
				size = len(payload)
				parts := 1 + r.IntN(4)
				for p := 0; p < parts; p++ {
					lo, hi := size*p/parts, size*(p+1)/parts
					fop := op
					if p > 0 {
						fop = OpContinuation
					}
					stream = append(stream, mustMasked(fop, p == parts-1, 0, payload[lo:hi])...)
					if p == parts-1 {
						want = append(want, frame{op: op, payload: payload}) // echoed as the last fragment arrives
					}
					if r.IntN(3) == 0 {
						ping := []byte{byte(m), byte(p)}
						stream = append(stream, mustMasked(OpPing, true, 0, ping)...)
						want = append(want, frame{op: OpPong, payload: ping})
					}
				}
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				for off := 0; off < len(stream); {
					n := min(len(stream)-off, 1+r.IntN(9000))
					if _, err := c.conn.Write(stream[off : off+n]); err != nil {
						assert.NoError(t, err)
						return
					}
					off += n
				}
			}()
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i, w := range want {
					f, err := c.read()
					if !assert.NoError(t, err, "client %d reply %d", ci, i) {
						return
					}
					if !assert.Equal(t, w.op, f.op, "client %d reply %d", ci, i) ||
						!assert.True(t, bytes.Equal(w.payload, f.payload), "client %d reply %d differs", ci, i) {
						return
					}
				}
			}()
		}
		wg.Wait()
		require.False(t, t.Failed())
	})
}
