// Package loopback keeps the load generators on this machine: every address
// they are given must be a loopback address.
package loopback

import (
	"fmt"
	"net"
	"net/netip"
)

// Addr checks that addr ("host:port") names a loopback address and returns
// the address to dial. "localhost" becomes 127.0.0.1 so that no resolver is
// consulted; any other host name is refused.
func Addr(addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("-addr %q: %w", addr, err)
	}
	if host == "localhost" {
		return net.JoinHostPort("127.0.0.1", port), nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return "", fmt.Errorf("-addr %q: host must be a loopback IP (127.0.0.0/8, ::1) or localhost; refusing to send load elsewhere", addr)
	}
	if !ip.Unmap().IsLoopback() {
		return "", fmt.Errorf("-addr %q: %s is not a loopback address; only 127.0.0.0/8 or ::1 may be loaded", addr, host)
	}
	return addr, nil
}
