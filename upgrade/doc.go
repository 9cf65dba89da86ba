// Package upgrade restarts a veloq program without dropping a connection:
// the running process hands its listening sockets to a new process of the
// program (a new binary, say), waits until that one serves, then stops
// accepting and drains, as nginx does on SIGUSR2 and cloudflare/tableflip
// does for Go programs.
//
// # Use
//
//	u, err := upgrade.New() // reads what an old process passed, if any
//	srv, _ := vhttp.NewServer(h)
//	u.Listen(srv, "tcp", ":8080")       // the old process's sockets, or new ones
//	u.ListenPacket(udpSrv, "udp", ":53", ph)
//	u.Ready()                           // the old process may go now
//	<-sigusr2
//	if err := u.Upgrade(ctx); err != nil {
//		log.Print(err) // the new process failed: keep serving
//	} else {
//		srv.Shutdown(ctx) // drain, then exit
//	}
//
// It works with any server offering Listen, ListenFiles and ListenerFiles
// (vnet.Server, vhttp.Server and so the WebSocket servers upgraded
// from it) and with vnet.Server's datagram listeners.
//
// # Mechanism
//
// Upgrade starts the program (os.Args by default) with the sockets as
// inherited descriptors (os/exec's ExtraFiles, from 3 on, as systemd
// passes them), their names in VELOQ_UPGRADE_FILES, and the write end of
// a pipe named by VELOQ_UPGRADE_READY, on which the new process writes
// one byte from Ready. Exec with inherited descriptors was chosen over a
// Unix socket with SCM_RIGHTS: the new process is our child, so there is
// no rendezvous path to create, secure and clean up, no protocol to
// version, and the parent learns of a crash at start from wait(2) at
// once, not from a timeout; SCM_RIGHTS pays off when the processes are
// unrelated (a supervisor starts the new one), which a self-upgrade is
// not.
//
// Every address is handed over whole: a server listening with
// SO_REUSEPORT has one socket per loop, each with its own accept queue,
// and all of them go (the new process serves them with ListenFiles, one
// per loop, see vnet.Server.ListenFiles), so no queue is orphaned.
//
// # Why nothing queued is reset
//
// The descriptors passed refer to the same open sockets (file
// descriptions), not copies. A connection the kernel has queued on a
// listening socket is accepted by whichever process accepts first; when
// the old process closes its descriptors on Shutdown, the socket is not
// closed, since the new process holds it, and the connections still
// queued stay queued for the new process. The code relies on this
// reference counting only: it needs neither accepting the old queues
// empty nor net.ipv4.tcp_migrate_req (which moves requests between
// distinct SO_REUSEPORT sockets when one closes, a case that does not
// arise here). The same holds for datagrams queued on a UDP socket.
// What the old process has accepted or read it serves itself while it
// drains.
//
// # Faults
//
// If the new process exits before it is ready (it crashed, or refused
// the descriptors), Upgrade returns ErrExited with its exit status; if it
// is not ready within ReadyTimeout, it is killed and Upgrade returns
// ErrNotReady. Either way the old process has closed nothing and goes on
// serving. A second Upgrade during one fails with ErrInProgress.
//
// This package is experimental in v0.1.0: it is new, and its API may
// change in a minor release without a deprecation period (see the
// CHANGELOG's v0.1.0 section).
package upgrade
