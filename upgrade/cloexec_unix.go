//go:build unix

package upgrade

import "syscall"

// closeOnExec marks an inherited descriptor close-on-exec.
func closeOnExec(fd int) error {
	syscall.CloseOnExec(fd)
	return nil
}
