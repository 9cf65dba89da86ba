package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"

	vnet "github.com/veloq/veloq/net"
	"github.com/veloq/veloq/upgrade"
)

// udpConfig carries the flags UDP mode uses.
type udpConfig struct {
	addr, network string
	loops         int
	backend       vnet.Backend
	pin           bool
	gso, gro      bool
	logger        *slog.Logger
	opts          []vnet.Option
	upg           *upgrade.Upgrader
}

// udpEcho sends every datagram back to its sender, from the loop: the
// replies of one loop iteration leave in one sendmmsg. Reply answers
// unixgram senders too, whose from is no AddrPort.
func udpEcho(pc *vnet.PacketConn, p []byte, _ netip.AddrPort) { _ = pc.Reply(p) }

// runUDP serves -mode udp until ctx is done, then prints the sockets'
// counters.
func runUDP(ctx context.Context, cfg udpConfig) error {
	network := cfg.network
	if network == "tcp" || network == "" {
		network = "udp"
	}
	opts := append([]vnet.Option{vnet.WithLoops(cfg.loops), vnet.WithBackend(cfg.backend), vnet.WithPin(cfg.pin),
		vnet.WithLogger(cfg.logger), vnet.WithUDPOffload(cfg.gso, cfg.gro)}, cfg.opts...)
	srv, err := vnet.NewServer(&vnet.HandlerFuncs{}, opts...) // serves datagrams only
	if err != nil {
		return err
	}
	defer srv.Close()
	pl, err := cfg.upg.ListenPacket(srv, network, cfg.addr, vnet.PacketHandlerFunc(udpEcho))
	if err != nil {
		return err
	}
	if err := cfg.upg.Ready(); err != nil {
		return err
	}
	st := pl.Stats()
	fmt.Printf("echo-server: udp echo on %s, backend %s, %d loops, gso %s, gro %s, pid %d\n",
		pl.Addr(), pl.Server().Backend(), cfg.loops, onOff(st.GSO), onOff(st.GRO), os.Getpid())
	<-ctx.Done()
	fmt.Println("echo-server: shutting down")
	err = pl.Close() // first, so that the counters are final
	for i, pc := range pl.Conns() {
		s := pc.Stats()
		fmt.Printf("echo-server: socket %d: %d received, %d sent, %d dropped (output queue full), %d dropped by the kernel (receive buffer full), %d truncated, %d errors, %d GSO sends, %d GRO receives\n",
			i, s.Received, s.Sent, s.Dropped, s.KernelDrops, s.Truncated, s.Errors, s.GSOSends, s.GROReceives)
	}
	return err
}
