package net

import (
	"bytes"
	"runtime"
	"strconv"
)

// goroutineID names the calling goroutine. It reads the id from the
// goroutine's stack header ("goroutine 7 [running]:"), which is slow, but
// only InLoop and race builds' checks call it, and only for a loop that
// is not locked to a thread (the portable backend's, Loop.self).
func goroutineID() int {
	var buf [32]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.Atoi(string(b))
	return id
}
