package http

import (
	"net"
	"os"
)

// ListenFiles serves inherited listening sockets (from systemd, see
// [vnet.ActivationFiles], or from an upgrade), as [vnet.Server.ListenFiles]
// does, with the same checks and sharing out among loops. WebSocket
// servers, which upgrade requests of this server, inherit the same way.
func (s *Server) ListenFiles(files ...*os.File) (net.Addr, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrServerClosed
	}
	return s.ns.ListenFiles(files...)
}

// ListenerFiles returns duplicates of the sockets listening on addr (nil:
// all), to hand to another process, as [vnet.Server.ListenerFiles] does.
func (s *Server) ListenerFiles(addr net.Addr) ([]*os.File, error) {
	return s.NetServer().ListenerFiles(addr)
}
