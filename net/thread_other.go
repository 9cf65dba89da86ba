//go:build !linux

package net

import (
	"bytes"
	"runtime"
	"strconv"
)

// threadID names the calling goroutine, which outside Linux stands for
// the thread: x/sys/unix has no gettid there, and the loop is one
// goroutine locked to its thread, so the two name the same thing. It reads
// the id from the goroutine's stack header ("goroutine 7 [running]:"),
// which is slow, but only InLoop and race builds' checks call it, and
// only on the portable backend.
func threadID() int {
	var buf [32]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.Atoi(string(b))
	return id
}
