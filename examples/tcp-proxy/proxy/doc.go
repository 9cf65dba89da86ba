// Package proxy is a TCP proxy on veloq's reactor loops: every client
// connection is paired with a connection to one of several backends, and
// bytes are forwarded both ways until both directions have ended.
//
// A Proxy is the Handler of a veloq server:
//
//	p, err := proxy.New([]string{"127.0.0.1:9001", "127.0.0.1:9002"})
//	srv, err := vnet.Listen("tcp", "127.0.0.1:8000", p, vnet.WithLoops(2))
//
// # Pairing
//
// When a client connects, its loop dials the backend (Loop.Dial does not
// block on the loop; the dial timeout is its context's deadline), so the
// client and its backend connection live on the same loop and forwarding
// needs no lock. Backends are chosen round-robin; a backend
// whose connect failed (refused, timed out) is skipped for a cooldown
// while another is available, and a client whose connect failed is tried
// on the next backend, each at most once. While the connect is pending
// the client's reading is paused, so its bytes wait in the kernel. When no
// backend can be reached the client is closed and a line is logged.
//
// A pair goes through these states:
//
//	routing ──ClientHello complete, route found──▶ connecting ──connected──▶ linked
//	(WithSNI)                                       │ ▲ connect failed:       │
//	   │                                            │ └── next backend        │
//	   │ no usable hello,                           │ no backend              │ both directions
//	   │ no route                                   │ reachable               │ ended, or an error
//	   ▼                                            ▼                         ▼
//	closed ◀────────────────────────────────────────┴─────────────────────────┘
//
// Without WithSNI a pair starts in connecting. Routing is described under
// TLS passthrough.
//
// # Backpressure
//
// Forwarding copies what one side delivered into the other's output, up
// to a limit (WithBufferLimit) of bytes queued toward that side. Past it,
// reading from the source pauses until the destination has sent half of
// it (Conn.PauseRead, Conn.OnDrain): a slow side stops reading from the
// fast one, and memory per pair stays bounded whatever the peers do.
//
// # Half-close and errors
//
// A FIN from one side becomes a shutdown of writing on the other, after
// everything before it has been sent; the pair is gone when both
// directions have ended. A reset or error on one side resets the other
// (SO_LINGER 0, then close), so neither peer mistakes a broken stream for
// a complete one.
//
// # Splicing
//
// WithSplice moves bytes with the kernel's splice(2) instead of copying
// them through user space (Conn.SpliceTo): from the connect on
// (SpliceAlways), or per direction once one read delivers a large chunk
// (SpliceLarge), which keeps small request/response traffic on the
// batched copy path. A direction that cannot be spliced (no pipe to be
// had when the process is out of descriptors) goes on by copy. Spliced
// bytes are counted in Stats when their direction ends.
//
// # TLS termination
//
// Served by a listener with vnet.WithTLS, the proxy sees its clients'
// plaintext and forwards it to plaintext backends: the TLS layer decrypts
// what clients send and encrypts what the proxy writes to them. Such a
// pair is always copied (Conn.ForwardTo), whatever WithSplice says: the
// client's socket carries ciphertext, which the kernel cannot translate.
//
// # TLS passthrough
//
// With WithSNI the proxy does not terminate TLS; it chooses the backend
// by the server name the client's ClientHello asks for (SNI). A new pair
// is routing: its client is read, but nothing is forwarded and no backend
// is dialled; each input is parsed from the start with package tlshello
// and left in the client's buffer. Parse answers within tlshello.MaxLen
// bytes (17 KiB), so that bounds what a routing client holds, and the
// hello timeout (WithHelloTimeout) bounds how long. A complete hello picks
// the route (exact names, then one-label wildcards, then the default
// backends); the client's reading pauses and the pair dials as any other,
// on the client's loop, and once linked forwards the buffered bytes, the
// hello included, unchanged, then everything after them (spliced if
// WithSplice says so: the bytes are not decrypted). A client that is not
// TLS, sends a malformed or oversized hello, does not complete it in time,
// ends inside it, or names a server no route takes (without default
// backends) is closed, counted in Stats and logged at most once a second.
package proxy
