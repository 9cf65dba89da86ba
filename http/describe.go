package http

import (
	"fmt"

	vnet "github.com/veloq/veloq/net"
)

// Describe names the user code behind a connection for the net layer's
// blocked-loop warning (see vnet.Describer), which would otherwise name
// this adapter, the same for every program: the route pattern when a
// Router matched the connection's last request, else the type of the
// handler given to NewServer (the wrapped net/http handler's for FromStd).
func (h netHandler) Describe(c *vnet.Conn) string {
	if cs, ok := c.Value().(*conn); ok && cs.pattern != "" {
		return "route " + cs.pattern
	}
	if sh, ok := h.s.h.(*stdHandler); ok {
		return fmt.Sprintf("handler %T (FromStd)", sh.h)
	}
	return fmt.Sprintf("handler %T", h.s.h)
}

var _ vnet.Describer = netHandler{}
