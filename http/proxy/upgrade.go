package proxy

import (
	"errors"

	vhttp "github.com/veloq/veloq/http"
	"github.com/veloq/veloq/http/client"
	"github.com/veloq/veloq/internal/sock"
	vnet "github.com/veloq/veloq/net"
)

// An upgrade request (an HTTP/1.1 request whose Connection lists
// "upgrade", with an Upgrade field: WebSocket's handshake, say) is
// forwarded with "Connection: Upgrade" and its Upgrade field, the only
// hop-by-hop fields the proxy keeps (RFC 9110 §7.8). An upstream that
// switches protocols (101) gets its answer's head passed on, and then the
// client's connection and the upstream's are joined into a tunnel: bytes
// are relayed both ways, unchanged, until both directions have ended. An
// upstream that answers anything else is forwarded as usual, and both
// connections go on with HTTP.

// Field names and values an upgrade keeps.
var (
	nameConnection = []byte("Connection")
	nameUpgrade    = []byte("Upgrade")
	valUpgrade     = []byte("Upgrade")
)

// errTunnelPeer resets one side of a tunnel when the other failed.
var errTunnelPeer = errors.New("proxy: the other side of the tunnel failed")

// switchProtocols passes the upstream's 101 on and joins the client's
// connection and the upstream's into a tunnel. It runs in
// OnResponseHead, where the client library lets the upstream connection
// be taken; OnResponseEnd follows with no error.
func (ex *exchange) switchProtocols(call *client.Call, resp *client.ResponseHead) {
	uc, err := call.Hijack()
	if err != nil {
		// Not a 101 in OnResponseHead: cannot happen.
		ex.badSwitch = true
		call.Cancel()
		return
	}
	p, rsp := ex.p, ex.rsp
	h := rsp.Header()
	conns := ex.conns[:0]
	for i := range resp.Fields {
		if classify(resp.Fields[i].Name) == kindConn {
			conns = append(conns, resp.Fields[i].Value)
		}
	}
	for i := range resp.Fields {
		fl := &resp.Fields[i]
		switch classify(fl.Name) {
		case kindConn, kindTE, kindFramed:
			continue
		case kindHop:
			if !foldEq(fl.Name, "upgrade") {
				continue
			}
		default:
			if len(conns) > 0 && listed(conns, fl.Name) {
				continue
			}
		}
		h.AddBytes(fl.Name, fl.Value)
	}
	ex.conns = conns[:0]
	h.AddBytes(nameConnection, valUpgrade)

	t := &tunnel{p: p}
	t.up = tunnelEnd{t: t, src: ex.front, dst: uc}
	t.down = tunnelEnd{t: t, src: uc, dst: ex.front}
	t.up.resume, t.down.resume = t.up.resumeSrc, t.down.resumeSrc
	// The tunnel paces itself (see forward): the loop's automatic pause
	// would stop the wrong side.
	uc.SetWriteWaterMarks(0, 0)
	ex.headSent = true
	rsp.WriteHead(vhttp.StatusSwitchingProtocols, -1)
	ex.rsp, ex.finished = nil, true
	p.tunnels.Add(1)
	// The client's bytes that came after its request go to t.up at once;
	// the upstream's that came with the 101 are presented to t.down
	// after this callback (the client library redelivers them).
	if err := rsp.Hijack(&t.up); err != nil {
		// The client left: the upstream connection goes too.
		p.tunnels.Add(-1)
		uc.Abort(err)
		rsp.Fail(vhttp.StatusBadGateway)
		return
	}
	uc.SetValue(nil)
	uc.SetHandler(&t.down)
	p.upgrades.Add(1)
}

// A tunnel relays bytes both ways between a client and its upstream after
// a 101, both on one loop.
type tunnel struct {
	p      *Proxy
	up     tunnelEnd // the client's handler: client → upstream
	down   tunnelEnd // the upstream's handler: upstream → client
	closed int       // connections closed, of two
}

// tunnelEnd is the handler of one connection of a tunnel, which forwards
// that connection's input (src) to the other (dst).
type tunnelEnd struct {
	t        *tunnel
	src, dst *vnet.Conn
	paused   bool   // src waits for dst to drain
	resume   func() // resumeSrc, made once
}

// OnOpen runs for the client's connection when the server hands it over.
func (e *tunnelEnd) OnOpen(c *vnet.Conn) { c.SetWriteWaterMarks(0, 0) }

// OnData forwards c's input to the other side.
func (e *tunnelEnd) OnData(c *vnet.Conn) { e.forward() }

// forward moves src's input to dst, no more than the proxy's buffer
// limit (WithMaxBuffered) queued toward dst; what does not fit stays in
// src, whose reading pauses until dst has sent half of the limit. So a
// tunnel holds at most about twice the limit, whatever its peers do.
func (e *tunnelEnd) forward() {
	src, dst := e.src, e.dst
	limit := e.t.p.cfg.maxBuffer
	if n := min(src.Buffered(), limit-dst.OutputBuffered()); n > 0 {
		if _, err := src.ForwardTo(dst, n); err != nil {
			resetConn(src, errTunnelPeer)
			return
		}
	}
	if q := dst.OutputBuffered(); !e.paused && (src.Buffered() > 0 || q >= limit) {
		if int64(q) > e.t.p.tunnelPeak.Load() {
			e.t.p.tunnelPeak.Store(int64(q)) // a test's bound; racy max is fine
		}
		e.paused = true
		src.PauseRead()
		dst.OnDrain(limit/2, e.resume)
	}
}

func (e *tunnelEnd) resumeSrc() {
	e.paused = false
	if !e.src.Closed() {
		e.src.ResumeRead() // shows the input left in src first
	}
}

// OnEOF passes the half-close on: dst sees a FIN after the last byte
// relayed. A connection closes by itself once it has both received a FIN
// and sent one.
func (e *tunnelEnd) OnEOF(c *vnet.Conn) {
	if e.dst.CloseWrite() != nil {
		c.Close() // nowhere to pass it: this side is done too
	}
}

// OnClose ends one side; a failure resets the other, so that its peer
// does not take a broken stream for a complete one.
func (e *tunnelEnd) OnClose(c *vnet.Conn, err error) {
	t := e.t
	if t.closed++; t.closed == 2 {
		t.p.tunnels.Add(-1)
	}
	if err != nil {
		resetConn(e.dst, errTunnelPeer)
	}
}

// resetConn closes c with a reset (SO_LINGER 0).
func resetConn(c *vnet.Conn, cause error) {
	if c.Closed() {
		return
	}
	_ = sock.LingerZero(c.Fd())
	c.Abort(cause)
}
