package websocket

import (
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"math"
	"strings"

	"github.com/veloq/veloq/bufpool"
	vhttp "github.com/veloq/veloq/http"
)

// acceptGUID is the fixed string RFC 6455 §1.3 appends to the client's key.
const acceptGUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

// deflateResponse is the extension the server answers an acceptable
// permessage-deflate offer with: every message compressed on its own, in
// both directions.
const deflateResponse = "permessage-deflate; server_no_context_takeover; client_no_context_takeover"

// An Upgrader turns HTTP requests into WebSocket connections served on
// the request's loop. It is safe for concurrent use; create it once with
// NewUpgrader and share it between handlers.
type Upgrader struct {
	cfg   config
	pool  *bufpool.Pool // fragment and inflate buffers
	flate flatePools
	stats counters
}

// NewUpgrader returns an Upgrader with the given options applied to the
// defaults.
func NewUpgrader(opts ...Option) *Upgrader {
	u := &Upgrader{cfg: defaultConfig(), pool: bufpool.NewPool()}
	for _, o := range opts {
		o(&u.cfg)
	}
	return u
}

// Upgrade validates r as a WebSocket opening handshake (RFC 6455 §4.2.1),
// writes the 101 Switching Protocols answer to w and hands the connection
// to h once the HTTP handler returns: h.OnOpen runs then, on the loop,
// and h's other methods as messages arrive.
//
// A request that is not a valid handshake is answered here and Upgrade
// returns an error wrapping ErrBadHandshake (or ErrOriginRejected):
// 405 for a method other than GET, 400 for HTTP/1.0, a missing or
// malformed Sec-WebSocket-Key, 426 Upgrade Required when the Upgrade or
// Connection fields do not ask for websocket or Sec-WebSocket-Version is
// not 13 (with the version the server speaks), 403 when the Origin check
// refuses it. The HTTP handler then just returns.
//
// Authentication and routing are the HTTP handler's before it calls
// Upgrade; header fields it set on w (a cookie, say) go out with the 101.
// Upgrade must be called from a handler running on the loop (not an
// offloaded one); it allocates the connection and nothing else that
// lives past the call.
func (u *Upgrader) Upgrade(w *vhttp.ResponseWriter, r *vhttp.Request, h Handler) error {
	err := u.upgrade(w, r, h)
	if err != nil {
		u.stats.rejected.Add(1)
		u.cfg.logger.Debug("websocket: handshake refused", "remote", w.RemoteAddr(), "err", err)
		return err
	}
	return nil
}

func (u *Upgrader) upgrade(w *vhttp.ResponseWriter, r *vhttp.Request, h Handler) error {
	if h == nil {
		return fmt.Errorf("%w: nil Handler", ErrBadHandshake)
	}
	if string(r.Method) != "GET" {
		w.Header().Set("Allow", "GET")
		return reject(w, vhttp.StatusMethodNotAllowed, "method is not GET")
	}
	if r.ProtoMinor < 1 {
		return reject(w, vhttp.StatusBadRequest, "HTTP/1.0 cannot upgrade")
	}
	if !headerHasToken(r, "Upgrade", "websocket") {
		w.Header().Set("Upgrade", "websocket")
		return reject(w, vhttp.StatusUpgradeRequired, `no "websocket" in Upgrade`)
	}
	if r.Upgrade == nil {
		// The parser sets Upgrade only when Connection lists "upgrade"
		// (and there is an Upgrade field, checked just above).
		w.Header().Set("Upgrade", "websocket")
		return reject(w, vhttp.StatusUpgradeRequired, `no "upgrade" in Connection`)
	}
	if v := r.Header("Sec-WebSocket-Version"); string(v) != "13" {
		w.Header().Set("Sec-WebSocket-Version", "13")
		w.Header().Set("Upgrade", "websocket")
		return reject(w, vhttp.StatusUpgradeRequired, "Sec-WebSocket-Version is not 13")
	}
	key, ok := r.Lookup("Sec-WebSocket-Key")
	if !ok || !validKey(key) {
		return reject(w, vhttp.StatusBadRequest, "Sec-WebSocket-Key is not 16 bytes in base64")
	}
	if !u.originOK(r) {
		w.WriteHeader(vhttp.StatusForbidden)
		w.WriteString("websocket: origin not allowed\n")
		return ErrOriginRejected
	}
	// Hijack only records who takes the connection when the handler
	// returns; it refuses exactly when the handler is not on the loop.
	c := &Conn{nc: w.Conn(), h: h, u: u}
	if err := w.Hijack((*loopHandler)(c)); err != nil {
		w.WriteHeader(vhttp.StatusInternalServerError)
		return fmt.Errorf("%w: Upgrade needs a handler running on the loop, not an offloaded one: %w", ErrBadHandshake, err)
	}
	c.subproto = u.selectSubprotocol(r)
	if u.cfg.compression && acceptDeflate(r) {
		c.deflate = true
	}
	c.dec = Decoder{Deflate: c.deflate, MaxFrame: u.cfg.maxFrame, MaxMessage: u.cfg.maxMessage}

	var accept [28]byte
	acceptKey(accept[:], key)
	hd := w.Header()
	hd.Set("Upgrade", "websocket")
	hd.Set("Connection", "Upgrade")
	hd.SetBytes([]byte("Sec-WebSocket-Accept"), accept[:])
	if c.subproto != 0 {
		hd.Set("Sec-WebSocket-Protocol", c.Subprotocol())
	}
	if c.deflate {
		hd.Set("Sec-WebSocket-Extensions", deflateResponse)
	}
	w.WriteHeader(vhttp.StatusSwitchingProtocols)
	return nil
}

// reject answers a bad handshake with status and a one-line reason.
func reject(w *vhttp.ResponseWriter, status int, why string) error {
	w.WriteHeader(status)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteString("websocket: ")
	w.WriteString(why)
	w.WriteString("\n")
	return fmt.Errorf("%w: %s", ErrBadHandshake, why)
}

// acceptKey writes base64(SHA-1(key + GUID)) into dst (28 bytes).
func acceptKey(dst []byte, key []byte) {
	s := sha1.New()
	s.Write(key)
	s.Write([]byte(acceptGUID))
	var sum [sha1.Size]byte
	base64.StdEncoding.Encode(dst, s.Sum(sum[:0]))
}

// AcceptKey returns the Sec-WebSocket-Accept value for a client's
// Sec-WebSocket-Key (RFC 6455 §4.2.2), for clients and tests.
func AcceptKey(key string) string {
	var b [28]byte
	acceptKey(b[:], []byte(key))
	return string(b[:])
}

// validKey reports whether key is base64 for exactly 16 bytes.
func validKey(key []byte) bool {
	if len(key) != 24 {
		return false
	}
	var raw [18]byte
	n, err := base64.StdEncoding.Decode(raw[:], key)
	return err == nil && n == 16
}

// originOK applies the Origin check.
func (u *Upgrader) originOK(r *vhttp.Request) bool {
	if u.cfg.checkOrigin != nil {
		return u.cfg.checkOrigin(r)
	}
	origin, ok := r.Lookup("Origin")
	if !ok {
		return true
	}
	host := string(origin)
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	} else {
		return false // "null" or garbage: not a same-origin page
	}
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	return strings.EqualFold(host, string(r.Host))
}

// selectSubprotocol returns the server's most preferred subprotocol that
// the client offers, as its position in the configured list plus one, or 0
// for none. (A connection keeps this number, not the string.)
func (u *Upgrader) selectSubprotocol(r *vhttp.Request) uint16 {
	for k, want := range u.cfg.subprotocols {
		if k == math.MaxUint16-1 {
			break
		}
		for i := range r.Headers {
			f := &r.Headers[i]
			if !strings.EqualFold(string(f.Name), "Sec-WebSocket-Protocol") {
				continue
			}
			for list := f.Value; len(list) > 0; {
				var tok []byte
				tok, list = nextElem(list, ',')
				if string(tok) == want {
					return uint16(k + 1)
				}
			}
		}
	}
	return 0
}

// headerHasToken reports whether any field named name lists token
// (comma-separated, compared case-insensitively).
func headerHasToken(r *vhttp.Request, name, token string) bool {
	for i := range r.Headers {
		f := &r.Headers[i]
		if !strings.EqualFold(string(f.Name), name) {
			continue
		}
		for list := f.Value; len(list) > 0; {
			var tok []byte
			tok, list = nextElem(list, ',')
			if strings.EqualFold(string(tok), token) {
				return true
			}
		}
	}
	return false
}

// nextElem splits the first element, trimmed of spaces and tabs, off a
// list separated by sep.
func nextElem(list []byte, sep byte) (elem, rest []byte) {
	i := 0
	for i < len(list) && list[i] != sep {
		i++
	}
	elem, rest = list[:i], list[min(i+1, len(list)):]
	for len(elem) > 0 && (elem[0] == ' ' || elem[0] == '\t') {
		elem = elem[1:]
	}
	for len(elem) > 0 && (elem[len(elem)-1] == ' ' || elem[len(elem)-1] == '\t') {
		elem = elem[:len(elem)-1]
	}
	return elem, rest
}

// acceptDeflate reports whether the client offers permessage-deflate with
// parameters the server can honour (RFC 7692 §7.1): the server always
// answers with no context takeover both ways and a 32 KiB window, so an
// offer that limits the server's window below 15 bits is declined, as is
// one with an unknown or repeated parameter. Later offers are fallbacks
// for earlier ones; the first acceptable one wins.
func acceptDeflate(r *vhttp.Request) bool {
	for i := range r.Headers {
		f := &r.Headers[i]
		if !strings.EqualFold(string(f.Name), "Sec-WebSocket-Extensions") {
			continue
		}
		for list := f.Value; len(list) > 0; {
			var ext []byte
			ext, list = nextElem(list, ',')
			if deflateOfferOK(ext) {
				return true
			}
		}
	}
	return false
}

// deflateOfferOK checks one extension offer, "name; param; param=value".
func deflateOfferOK(ext []byte) bool {
	name, params := nextElem(ext, ';')
	if !strings.EqualFold(string(name), "permessage-deflate") {
		return false
	}
	var seen [4]bool
	for len(params) > 0 {
		var p []byte
		p, params = nextElem(params, ';')
		key, val := p, []byte(nil)
		if i := strings.IndexByte(string(p), '='); i >= 0 {
			key, val = trimSpace(p[:i]), trimSpace(p[i+1:])
			if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
				val = val[1 : len(val)-1]
			}
		}
		var idx int
		switch strings.ToLower(string(key)) {
		case "server_no_context_takeover":
			idx = 0
		case "client_no_context_takeover":
			idx = 1
		case "server_max_window_bits":
			idx = 2
			if string(val) != "15" {
				return false // a smaller window than compress/flate's
			}
		case "client_max_window_bits":
			idx = 3
			if val != nil && !windowBits(val) {
				return false
			}
		default:
			return false
		}
		if seen[idx] {
			return false
		}
		seen[idx] = true
	}
	return true
}

func windowBits(v []byte) bool {
	switch string(v) {
	case "8", "9", "10", "11", "12", "13", "14", "15":
		return true
	}
	return false
}

func trimSpace(b []byte) []byte {
	e, _ := nextElem(b, 0)
	return e
}
