package websocket

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestIdleFootprint guards what an idle WebSocket connection adds to its
// net.Conn: the Conn with its Decoder, a 176-byte size class.
func TestIdleFootprint(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(Conn{}), uintptr(176), "Conn")
	require.LessOrEqual(t, unsafe.Sizeof(Decoder{}), uintptr(64), "Decoder")
}
