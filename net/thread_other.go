//go:build !linux

package net

// threadID names the calling goroutine, which outside Linux stands for
// the thread: x/sys/unix has no gettid there, and a loop is one
// goroutine, so the two name the same thing (goroutineID).
func threadID() int { return goroutineID() }
