//go:build unix && !darwin

package sock

import "golang.org/x/sys/unix"

// KeepIdle is the TCP option for the idle time before the first
// keep-alive probe.
const KeepIdle = unix.TCP_KEEPIDLE
