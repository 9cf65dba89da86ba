package websocket

import (
	"fmt"

	vnet "github.com/veloq/veloq/net"
)

// Describe names the connection's websocket handler for the net layer's
// blocked-loop warning (see vnet.Describer), which would otherwise name
// loopHandler, this package's adapter.
func (l *loopHandler) Describe(*vnet.Conn) string {
	return fmt.Sprintf("websocket handler %T", l.h)
}

var _ vnet.Describer = (*loopHandler)(nil)
