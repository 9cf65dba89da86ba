package sock

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

func unsafePointer(r *unix.RawSockaddrAny) unsafe.Pointer { return unsafe.Pointer(r) }
