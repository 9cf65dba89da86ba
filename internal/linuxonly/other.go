//go:build !linux

package linuxonly

// The compiler's error for this line is the message a user sees:
//
//	cannot use "veloq requires Linux (io_uring or epoll)" (untyped string constant) as int value in variable declaration
var _ int = "veloq requires Linux (io_uring or epoll)"
