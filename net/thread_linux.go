package net

import "golang.org/x/sys/unix"

// threadID names the calling OS thread (the loop is locked to one).
func threadID() int { return unix.Gettid() }
