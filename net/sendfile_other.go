//go:build !linux

package net

import "syscall"

// pageCached: cachestat(2) is Linux only. ENOSYS makes the loop stop
// asking, as on a Linux kernel older than 6.5; outside Linux the portable
// backend copies every file through the output queue anyway.
func pageCached(int, int64, int64) (bool, error) { return false, syscall.ENOSYS }
