package main

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// unsafePointer is the address of h's first header, for recvmmsg and
// sendmmsg. Sound: h is a heap slice of gen that lives for the whole run
// (heap objects do not move), and the uintptr made of the result is used
// only inside the system call expression that receives it.
func unsafePointer(h []unix.Mmsghdr) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(h)) }
