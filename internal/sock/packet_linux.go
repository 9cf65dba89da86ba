package sock

import (
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Drops returns the kernel's count of packets dropped on arrival at
// socket fd (sk_drops: its receive buffer was full, a checksum was bad, a
// socket filter refused it), read with getsockopt(SO_MEMINFO). The kernel
// keeps it in 32 bits: it wraps. One system call and no per-packet cost,
// which is why it is preferred to SO_RXQ_OVFL (a control message on every
// received datagram, parsed on the loop, and only as fresh as the last
// datagram that arrived).
func Drops(fd int) (uint32, error) {
	var mem [unix.SK_MEMINFO_VARS]uint32
	n := uint32(unsafe.Sizeof(mem))
	// Sound: the kernel writes at most n bytes (mem's size) into mem and
	// sets n to what it wrote; both pointers are converted in the call
	// expression, so mem and n stay referenced for the whole call. Raw:
	// getsockopt on a socket never sleeps.
	_, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_MEMINFO,
		uintptr(unsafe.Pointer(&mem)), uintptr(unsafe.Pointer(&n)), 0)
	if e != 0 {
		return 0, os.NewSyscallError("getsockopt SO_MEMINFO", e)
	}
	if n < 4*(unix.SK_MEMINFO_DROPS+1) {
		return 0, ErrNoDropCounter
	}
	return mem[unix.SK_MEMINFO_DROPS], nil
}
