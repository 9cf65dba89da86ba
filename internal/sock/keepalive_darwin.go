package sock

import "golang.org/x/sys/unix"

// KeepIdle is the TCP option for the idle time before the first
// keep-alive probe; macOS names it TCP_KEEPALIVE.
const KeepIdle = unix.TCP_KEEPALIVE
