// Package linuxonly stops a build for any GOOS but Linux with one message,
// "veloq requires Linux", instead of the dozens of undefined golang.org/x/sys/unix
// names (unix.CPUSet, unix.SOCK_NONBLOCK, io_uring syscalls…) that the
// Linux-only packages would otherwise print.
//
// On Linux the package is empty. Every package at the bottom of veloq that
// needs Linux (uring, epoll, internal/sock, internal/affinity,
// internal/backendtest; bufpool, which needs mmap, outside unix) has its
// Linux files tagged //go:build linux and one !linux file that imports this
// package. Elsewhere this package fails to compile, and the go command then
// compiles none of the packages above it, so that message is the only one.
//
// It goes when a portable backend exists.
package linuxonly
