//go:build linux

// Linux only: tests the io_uring and epoll backends' internals.

package net

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// TestIdleFootprint guards what every idle connection costs the heap: the
// Conn (a 288-byte size class) and the backends' per-slot records. A field
// added to one of them should either fit or move rare state into connAux.
func TestIdleFootprint(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(Conn{}), uintptr(288), "Conn")
	require.LessOrEqual(t, unsafe.Sizeof(uconn{}), uintptr(48), "uconn")
	require.LessOrEqual(t, unsafe.Sizeof(econn{}), uintptr(32), "econn")
}
