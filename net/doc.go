// Package net is veloq's TCP and UDP API: servers whose connections and
// datagram sockets are served by thread-per-core loops (io_uring, or epoll
// where io_uring is missing), and outbound connections driven by the same
// loops. It is the one package a TCP or UDP user imports. Its name shadows the standard library's net on
// purpose; import it as vnet:
//
//	import vnet "github.com/veloq/veloq/net"
//
// # Serving
//
// [Listen] starts a [Server] on an address with a [Handler];
// [ListenAndServe] serves until a context ends, then shuts down
// gracefully. To keep the Server while it runs (for [Server.Stats]), use
// [NewServer] and then [Server.Listen] or [Server.ListenAndServe];
// [Server.Shutdown] stops accepting, calls OnShutdown on each connection
// whose handler is a [ShutdownHandler] (so that it ends it its own way),
// waits for connections until its context ends (the drain timeout), cuts
// what remains, and releases every descriptor and thread; [Stats] counts
// the connections drained and cut. Options
// (With...) choose the number of loops, the backend, balancing, TLS
// ([WithTLS]), timeouts and the write water marks; [PublishExpvar] shows
// the Stats at /debug/vars. [Server.Dial] and [Server.DialTLS] open
// outbound connections served by the same loops.
//
// A [Handler] (or a [HandlerFuncs] of functions) gets a [Conn]'s events on
// the connection's loop: OnOpen, OnData (consume input with Next, Peek,
// Discard or Read; write with Write, which never blocks), OnEOF if it
// implements [EOFHandler], and OnClose. The rules:
//
//   - Handlers must not block the loop; offload heavy or blocking work
//     with [Offload] or [OffloadBlocking] (or the executor package and
//     Conn.Loop().Post). A callback that runs past Config.BlockThreshold is
//     logged with its handler type (or, for an adapter such as the HTTP
//     server's, what it says as a [Describer]) and counted in Stats.Blocked.
//   - Conn methods run on the connection's loop. Called from another
//     goroutine, the ones that return an error do nothing and return
//     [ErrNotOnLoop]; use Conn.AsyncWrite or Loop.Post there.
//   - OnClose gets nil after the handler's own close, io.EOF after the
//     peer's, and the cause otherwise, for every handler shape; the
//     connection's addresses still answer in it.
//   - Without OnEOF, the peer's FIN closes the connection; a relay
//     implements OnEOF and passes the half-close on (see EOFHandler).
//   - Offload keeps a connection's answers in order (see Offload).
//   - A port in use is refused; [WithPortSharing] shares it on purpose.
//
// [ErrClosed] is the standard library's net.ErrClosed, so errors.Is works
// with either name.
//
// # Relays
//
// A write that takes a connection's pending output above its high-water
// mark stops reading from that connection's peer until the output drains:
// that bounds the memory of a handler whose output answers its own input.
// A relay (a proxy, a tunnel) writes to one connection what another
// received, so that pause would stop the wrong side, and nothing else
// bounds the relay's buffered output. A relay therefore paces itself:
//
//   - turn the automatic pause off on both connections with
//     Conn.SetWriteWaterMarks(0, 0);
//   - forward at most a limit minus the destination's OutputBuffered, with
//     Conn.ForwardTo (or Write);
//   - when input is left over, or the destination is at the limit, pause
//     the source with PauseRead, and resume it from the destination's
//     OnDrain(limit/2, ...): the input left in the source is shown again.
//
// [Conn.ForwardTo]'s example is such a relay; examples/tcp-proxy is a
// complete one.
//
// # Datagrams
//
// [ListenPacket] serves a [PacketHandler] (or a [PacketHandlerFunc]) on a
// datagram network: "udp", "udp4", "udp6", or "unixgram" (a path, or
// "@name" for an abstract socket). [Server.ListenPacket] adds one to a
// Server that may also serve TCP, on the same loops. With the default
// balancing every loop gets its own socket on the port (SO_REUSEPORT: the
// kernel keeps a peer's datagrams on one socket by a hash of the
// addresses); otherwise, and always for unixgram, loop 0 has the only one.
// The [PacketListener] gives the bound address (the port the kernel chose
// for port 0), its sockets ([PacketListener.Conns]), their summed Stats,
// and Close.
//
// Each socket is a [PacketConn] owned by one loop. OnPacket runs on that
// loop for every datagram, with the payload and the sender's
// netip.AddrPort, both valid only during the call (the payload points
// into the loop's receive buffer: copy what must outlive it). A unixgram
// sender has a path, not an AddrPort: from is the zero AddrPort and
// [PacketConn.Reply] answers it (Reply answers the current sender on every
// network). [PacketConn.WriteTo] queues a copy of a datagram, and every
// datagram queued in one loop iteration leaves in one batch (sendmmsg);
// from other goroutines use [PacketConn.AsyncWriteTo]. A panicking
// handler loses its datagram only; the socket goes on.
//
// The loop receives without a system call per datagram: on io_uring a
// multishot recvmsg per socket fills a ring of buffers; on epoll it reads
// with recvmmsg, [WithPacketBatch] datagrams per call (16). The kernel's
// UDP offloads are probed per socket and used where it has them
// ([WithUDPOffload]): a run of same-size datagrams to one peer (up to 64,
// under 64 KiB, the last possibly shorter) leaves as one buffer the kernel
// cuts up (GSO, UDP_SEGMENT), and the kernel may coalesce a flow's
// datagrams into one receive (GRO, UDP_GRO), which the loop splits again:
// OnPacket always sees single datagrams.
//
// [Server.DialPacket] opens a connected socket on the least-loaded loop:
// it receives only from its peer, sends to it with [PacketConn.Write], and
// learns of ICMP port-unreachable reports (counted in Refused; the socket
// stays open). It takes no context: connecting a datagram socket waits for
// nothing on the network.
//
// UDP has no backpressure, and veloq adds none. A socket's queued output
// is bounded ([WithMaxPacketQueue], 1 MiB): a datagram past the bound is
// dropped, counted, and refused with [ErrPacketQueueFull]; one longer than
// UDP allows is refused with [ErrPacketTooLarge], and a missing
// destination, or one of a family the socket cannot reach, with
// [ErrPacketAddr]. A received datagram longer than the receive buffer
// ([WithPacketBuffer], 64 KiB) is cut by the kernel and dropped, counted
// as Truncated. No state is kept per peer.
// [PacketStats], from any goroutine through [PacketConn.Stats] or
// [PacketListener.Stats], counts datagrams and bytes each way, Dropped
// (output veloq refused), KernelDrops (input the kernel dropped, below),
// Truncated, Errors, Refused, GSO sends and GRO receives, Panics, and says
// whether the socket uses GSO and GRO.
//
// # Datagram receive buffers
//
// UDP has no flow control: datagrams that arrive while a socket's
// receive buffer is full are dropped by the kernel, which the loop never
// sees. [PacketStats].KernelDrops is the kernel's count of them (its
// per-socket drop counter, also the "drops" column of /proc/net/udp);
// [PacketStats].Dropped is a different thing, the output veloq's own
// queue refused. Drops come from bursts: the buffer must hold what
// arrives while the loop is busy elsewhere (other sockets, connections,
// a slow handler). The kernel charges each queued datagram its payload
// plus its bookkeeping (the skb's truesize): 832 bytes for a 64-byte
// datagram on loopback (Linux 6.x). It grants SO_RCVBUF as twice the size
// asked for, after capping the wish at net.core.rmem_max, silently: the
// default wish of 4 MiB ([WithPacketSocketBuffers]) gives 8 MiB, about
// 10,000 small datagrams, where rmem_max is at least 4 MiB, but only
// 416 KiB (about 500) under the common 208 KiB rmem_max. Size it as the
// peak rate times the longest pause of the loop times (about 800 bytes
// plus the datagram size), raise net.core.rmem_max to match
// (sysctl -w net.core.rmem_max=8388608), and raise it further while
// KernelDrops keeps growing. Spreading the port over more loops (one
// socket each with SO_REUSEPORT, the default) divides the load, and the
// kernel's drops with it, between the sockets.
//
// # Inherited sockets
//
// A server also serves listening sockets it did not bind: handed down by
// a parent, by systemd socket activation ([ActivationFiles] reads
// LISTEN_FDS, LISTEN_PID and LISTEN_FDNAMES), or by the old process of a
// hot upgrade (package upgrade). [Server.ListenFiles] serves stream
// sockets and [Server.ListenPacketFiles] datagram ones, duplicating and
// checking each (ErrNotSocket, ErrSocketType, ErrNotListening). Given as
// many sockets as loops or more, each loop accepts on its own (an old
// process's SO_REUSEPORT set keeps one queue per loop); given fewer,
// each is accepted on by one loop, which hands connections to the least
// loaded. [Server.ListenerFiles] and [PacketListener.Files] hand a
// server's sockets out in turn.
//
// # Platforms
//
// veloq builds on Linux, macOS, FreeBSD, NetBSD, DragonFly and Windows
// (amd64 and arm64; CI checks macOS, FreeBSD and Windows, and runs the
// Windows build of the tests under Wine; no real Windows machine has run
// it yet). Not on OpenBSD, which has no per-socket keep-alive
// options. On Linux, BackendAuto runs io_uring (Linux 6.1) or epoll;
// elsewhere it runs [BackendPortable], on Go's own net package (the
// runtime's poller: kqueue on macOS and the BSDs, IOCP on Windows) with
// goroutines doing the blocking reads, writes and accepts, and asking for
// BackendUring or BackendEpoll there fails with an error wrapping
// [ErrLinuxOnly]. On Windows Go's net makes and owns every socket (it
// cannot wrap one made elsewhere), and [Conn.Fd] is veloq's key for it,
// not an operating-system handle. What depends on the platform:
//
//	feature                    Linux                macOS, BSDs          Windows
//	backends                   io_uring, epoll,     portable             portable
//	                           portable
//	SpliceTo                   yes (not portable)   ErrCannotSplice      ErrCannotSplice
//	SendFile                   sendfile(2)          copies, 64 KiB       copies, 64 KiB
//	UDP GSO/GRO offload        yes                  no: one per call     no: one per call
//	Unix sockets               stream, datagram     stream, datagram     stream
//	WithPin (CPU affinity)     pins each loop       does nothing         does nothing
//	BalanceReusePort           a socket per loop,   loop 0 accepts and   as macOS
//	                           the kernel spreads   hands off
//	ListenFiles, activation,   yes                  yes                  errors.ErrUnsupported
//	upgrade (fd passing)
//	WithPortSharing            yes                  yes                  errors.ErrUnsupported
//	unixgram client replies    autobind (abstract)  unbound: no replies  no unixgram
//	packet drop counter        SO_MEMINFO           none                 none
//
// On the portable backend (any platform) Config.BatchWait does nothing;
// everything else (TLS, UDP, timers, water marks, Dial) behaves as on the
// other backends.
//
// # Not supported yet
//
// OpenBSD; a real Windows machine (only Wine runs the tests). This package serves TCP and Unix stream sockets
// (Listen) and datagrams (ListenPacket: UDP and unixgram). TLS is
// crypto/tls on the loop; kernel TLS (kTLS) is not used, and there is no
// DTLS or QUIC. Package http serves HTTP/1.1 and HTTP/2, not HTTP/3.
//
// # Engine
//
// The rest of the package is the engine under Server, for code that
// builds its own servers: [NewLoop] and Loop.Close (a loop without a
// Server), [Loop.AddListener] and [Listener] (serving a listening socket
// made elsewhere), [Config] (a loop's settings; [WithLoopConfig] passes
// them to a Server), [ProbeUring] (can this process run io_uring), and
// [WithCompletionBudget] (completions per iteration). Each of their doc
// comments says so first. The package's engine example builds two loops,
// hands one a listening socket of its own and dials it from the other.
// How the engine works (the loop's iteration,
// park and wake, the backend boundary, the memory rules, splicing) is
// written once, in ARCHITECTURE.md at the root of the repository.
package net
